/**
 * An acknowledged write always has its audit row, as a user of the real `svc` command sees it: Patients
 * are created by several clients at once against `svc --sqlite <file>` with SVC_AUDIT_KEY set, and the
 * process is killed with SIGKILL while writes are in flight. After a restart on the same file, every
 * create that was answered 201 has its `create` AuditEvent, and the chain verifies.
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { startSvc, tempDir } from "../support/process.ts"

const key = "a-test-audit-key-of-32-bytes-0001"

const create = async (base: string): Promise<string | undefined> => {
  try {
    const response = await fetch(`${base}/fhir/Patient`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({ resourceType: "Patient", name: [{ family: "Killed" }] })
    })
    if (response.status !== 201) return undefined
    return ((await response.json()) as { id: string }).id
  } catch {
    // The process went away before answering: not acknowledged.
    return undefined
  }
}

describe("the audit trail across a SIGKILL", () => {
  it("has a row for every acknowledged write, and the chain verifies", async () => {
    const dir = tempDir()
    try {
      const file = join(dir.path, "svc.sqlite")
      const env = { SVC_AUDIT_KEY: key }
      const first = await startSvc(["--sqlite", file], { env })
      await first.logged("serving")
      const acknowledged: Array<string> = []
      let stop = false
      // Eight clients writing until the kill; the kill comes once 60 writes were answered, with more in flight.
      const clients = Array.from({ length: 8 }, async () => {
        while (!stop) {
          const id = await create(first.url)
          if (id === undefined) return
          acknowledged.push(id)
          if (acknowledged.length >= 60 && !stop) {
            stop = true
            first.child.kill("SIGKILL")
          }
        }
      })
      await Promise.all(clients)
      const finished = await first.stop("SIGKILL")
      expect(finished.signal).toBe("SIGKILL")
      expect(acknowledged.length).toBeGreaterThanOrEqual(60)

      const second = await startSvc(["--sqlite", file], { env })
      try {
        await second.logged("serving")
        const recorded = new Set<string>()
        let next: string | undefined = `${second.url}/_audit?type=create&_count=1000`
        while (next !== undefined) {
          const page = (await (await fetch(next)).json()) as any
          for (const entry of page.entry ?? []) {
            const reference = (entry.resource.entity as ReadonlyArray<{ what?: { reference?: string } }>).find((entity) => entity.what?.reference !== undefined)!.what!.reference!
            recorded.add(reference.split("/")[1]!)
          }
          next = (page.link as ReadonlyArray<{ relation: string; url: string }>).find((link) => link.relation === "next")?.url
        }
        expect(acknowledged.filter((id) => !recorded.has(id))).toEqual([])
        const verified = (await (await fetch(`${second.url}/_audit/verify`)).json()) as any
        expect(verified).toMatchObject({ ok: true, first_problem: null, keyed: true })
        expect(verified.rows_checked).toBeGreaterThanOrEqual(acknowledged.length)
      } finally {
        await second.stop()
      }
    } finally {
      dir.remove()
    }
  }, 120_000)
})
