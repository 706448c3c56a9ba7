/** The pool of Patients a run reads and updates: created over HTTP on svc, written directly for the floor. */
import Database from "better-sqlite3"
import { randomUUID } from "node:crypto"
import { interrupted } from "./cleanup.ts"
import { samplePatient, storedPatient } from "./patients.ts"

/**
 * Creates `count` Patients on svc in transaction Bundles of `perBundle` (`POST /fhir`), `concurrency`
 * in flight, each request with `headers` besides its own (a bearer token under `--smart`); resolves with
 * their ids in order. One commit per bundle: on Postgres a thousand single creates take some twenty
 * seconds, the same Patients in bundles a few.
 */
export const seedSvc = async (
  url: string,
  count: number,
  { concurrency = 2, perBundle = 100, headers = {} }: {
    readonly concurrency?: number
    readonly perBundle?: number
    readonly headers?: Readonly<Record<string, string>>
  } = {}
): Promise<Array<string>> => {
  const ids: Array<string> = new Array(count)
  let next = 0
  const worker = async () => {
    for (let first = next; first < count; first = next) {
      next = first + perBundle
      const numbers = Array.from({ length: Math.min(next, count) - first }, (_, k) => first + k)
      const bundle = {
        resourceType: "Bundle",
        type: "transaction",
        entry: numbers.map((k) => ({ resource: samplePatient(k), request: { method: "POST", url: "Patient" } }))
      }
      const response = await fetch(`${url}/fhir`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/fhir+json", accept: "application/fhir+json" },
        body: JSON.stringify(bundle),
        signal: interrupted.signal
      })
      const text = await response.text()
      const created = response.status === 200
        ? ((JSON.parse(text) as { entry?: ReadonlyArray<{ response?: { location?: string } }> }).entry ?? [])
          .map((entry) => /^(?:.*\/)?Patient\/([^/]+)/.exec(entry.response?.location ?? "")?.[1])
        : []
      if (created.length !== numbers.length || created.some((id) => id === undefined)) {
        throw new Error(`creating the pool: POST /fhir (a transaction of ${numbers.length} Patients) answered ${response.status} without a Location for each: ${text.slice(0, 300)}`)
      }
      numbers.forEach((k, i) => (ids[k] = created[i] ?? ""))
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
