/** The pool of Patients a run reads and updates: created over HTTP on svc, written directly for the floor. */
import Database from "better-sqlite3"
import { randomUUID } from "node:crypto"
import { interrupted } from "./cleanup.ts"
import { samplePatient, storedPatient } from "./patients.ts"

/** Creates `count` Patients on svc with `concurrency` requests in flight; resolves with their ids. */
export const seedSvc = async (url: string, count: number, concurrency = 16): Promise<Array<string>> => {
  const ids: Array<string> = new Array(count)
  let next = 0
  const worker = async () => {
    for (let n = next++; n < count; n = next++) {
      const response = await fetch(`${url}/fhir/Patient`, {
        method: "POST",
        headers: { "content-type": "application/fhir+json" },
        body: JSON.stringify(samplePatient(n)),
        signal: interrupted.signal
      })
      const text = await response.text()
      const id = /\/Patient\/([^/]+)/.exec(response.headers.get("location") ?? "")?.[1]
      if (response.status !== 201 || id === undefined) {
        throw new Error(`creating the pool: POST /fhir/Patient answered ${response.status} without a usable Location: ${text.slice(0, 300)}`)
      }
      ids[n] = id
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return ids
}

/**
 * Writes `count` Patients, in the form svc returns them, into a new better-sqlite3 file for the
 * floor (WAL, like svc); resolves with their ids.
 */
export const seedFloor = (file: string, count: number): Array<string> => {
  const db = new Database(file)
  try {
    db.pragma("journal_mode = WAL")
    db.exec("CREATE TABLE t (id TEXT PRIMARY KEY, content TEXT NOT NULL)")
    const insert = db.prepare<[string, string]>("INSERT INTO t (id, content) VALUES (?, ?)")
    const lastUpdated = new Date().toISOString()
    const ids = Array.from({ length: count }, () => randomUUID())
    db.transaction(() => ids.forEach((id, n) => insert.run(id, storedPatient(id, n, lastUpdated))))()
    return ids
  } finally {
    db.close()
  }
}
