/**
 * Primary and standby on one Postgres database, as real processes (docs/cluster.md): a second primary is
 * refused; a standby waits, answers 503 as a standby, and after a kill -9 of the primary serves writes within
 * the lease's length and a second, with every acknowledged write kept; a primary stopped (SIGSTOP) past its
 * lease is fenced: the standby takes over, and the old primary, let go on (SIGCONT), commits nothing and exits;
 * processes started together on a new database apply the migrations once. The lease is 2 seconds here.
 */
import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { type Running, runSvc, startSvc } from "../support/process.ts"
import { createTestDatabase } from "../support/postgres.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()
const leaseSeconds = 2
const env = { SVC_CLUSTER_LEASE_SECONDS: String(leaseSeconds) }

const running: Array<Running> = []
afterAll(async () => {
  await Promise.all(running.map((process) => process.stop("SIGKILL")))
})

const start = async (url: string, extra: ReadonlyArray<string> = []) => {
  const started = await startSvc(["--postgres", url, ...extra], { cwd: scratch(), env })
  running.push(started)
  return started
}

const health = async (server: Running) => {
  const reply = await fetch(`${server.url}/healthz`)
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> }
}

const createPatient = (server: Running, family: string) =>
  fetch(`${server.url}/fhir/Patient`, {
    method: "POST",
    headers: { "content-type": "application/fhir+json" },
    body: JSON.stringify({ resourceType: "Patient", name: [{ family }] })
  })

const families = async (server: Running, family: string) => {
  const reply = await fetch(`${server.url}/fhir/Patient?family=${family}&_count=1000`)
  const bundle = (await reply.json()) as { entry?: Array<{ resource: { id: string } }> }
  return (bundle.entry ?? []).map((entry) => entry.resource.id).sort()
}

describe("primary and standby on one Postgres database", async () => {
  const { available, url } = await suiteDatabase()

  it.skipIf(!available)("refuses a second primary, keeps a standby waiting, and after a kill -9 of the primary the standby serves writes within the lease and a second, losing none", async () => {
    const primary = await start(url())
    await primary.logged("serving")
    const second = await runSvc(["--postgres", url(), "--bind", "127.0.0.1:0"], { cwd: scratch(), env })
    expect(second.code).toBe(3)
    expect(second.stderr).toMatch(/has a primary already: svc process \S+ holds the writer lease/)
    expect(second.stderr).toContain("--standby")

    const standby = await start(url(), ["--standby"])
    await standby.logged("listening")
    const waiting = await health(standby)
    expect(waiting).toMatchObject({ status: 503, body: { role: "standby", status: "starting", reason: "standby: waiting for the writer lease" } })
    expect((await fetch(`${standby.url}/readyz`)).status).toBe(503)
    expect((await health(primary))).toMatchObject({ status: 200, body: { role: "primary" } })

    const acknowledged: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const created = await createPatient(primary, "Kept")
      expect(created.status).toBe(201)
      acknowledged.push(((await created.json()) as { id: string }).id)
    }
    const killedAt = Date.now()
    await primary.stop("SIGKILL")
    await standby.logged("serving")
    const created = await createPatient(standby, "Kept")
    const servedAfter = Date.now() - killedAt
    expect(created.status).toBe(201)
    expect(servedAfter).toBeLessThan((leaseSeconds + 1) * 1000)
    acknowledged.push(((await created.json()) as { id: string }).id)
    expect(await health(standby)).toMatchObject({ status: 200, body: { role: "primary", status: "ok" } })
    expect(await families(standby, "Kept")).toEqual([...acknowledged].sort())
  }, 120_000)

  it.skipIf(!available)("fences a primary stopped past its lease: the standby takes over, and the old primary commits nothing and exits", async () => {
    const database = await createTestDatabase()
    try {
      const primary = await start(database.url)
      await primary.logged("serving")
      const standby = await start(database.url, ["--standby"])
      await standby.logged("listening")
      expect((await createPatient(primary, "Before")).status).toBe(201)
      primary.child.kill("SIGSTOP")
      // The lease runs out without renewals; the standby takes it and serves.
      await standby.logged("serving")
      const late = createPatient(primary, "Fenced").then((reply) => reply.status, () => "no answer")
      primary.child.kill("SIGCONT")
      const ended = await primary.stop("SIGCONT")
      expect(ended.code).toBe(1)
      expect(ended.stderr).toContain("another process took the writer lease")
      const answered = await late
      expect(answered === "no answer" || (typeof answered === "number" && answered >= 500)).toBe(true)
      expect(await families(standby, "Fenced")).toEqual([])
      expect(await families(standby, "Before")).toHaveLength(1)
      expect((await createPatient(standby, "After")).status).toBe(201)
    } finally {
      await Promise.all(running.splice(0).map((process) => process.stop("SIGKILL")))
      await database.drop()
    }
  }, 120_000)

  it.skipIf(!available)("applies the migrations once when several processes start together on a new database", async () => {
    const database = await createTestDatabase()
    try {
      const processes = await Promise.all([start(database.url, ["--standby"]), start(database.url, ["--standby"]), start(database.url, ["--standby"])])
      // One takes the lease and serves; the others wait for it.
      const first = await Promise.race(processes.map((process) => process.logged("serving").then(() => process)))
      const others = processes.filter((process) => process !== first)
      for (const other of others) expect((await health(other)).body).toMatchObject({ role: "standby", status: "starting" })
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        const versions = await client.query<{ version: string; applied: string }>("SELECT version, count(*) AS applied FROM svc_migrations GROUP BY version ORDER BY version")
        expect(versions.rows.length).toBeGreaterThan(10)
        expect(versions.rows.every((row) => Number(row.applied) === 1)).toBe(true)
        const lease = await client.query<{ epoch: string }>("SELECT epoch FROM svc_writer_lease")
        expect(lease.rows.map((row) => Number(row.epoch))).toEqual([1])
      } finally {
        await client.end()
      }
      for (const line of others.flatMap((other) => other.lines())) expect(line).not.toContain("applied migration")
    } finally {
      await Promise.all(running.splice(0).map((process) => process.stop("SIGKILL")))
      await database.drop()
    }
  }, 120_000)
})
