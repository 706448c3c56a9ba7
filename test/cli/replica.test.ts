/**
 * A replica beside its primary on one Postgres database, as real processes (docs/cluster.md): it serves reads
 * from the database, forwards writes and Bundles to the primary and relays the answer unchanged, honours
 * `X-Svc-Min-Ts` (waits until it has the commit, forwards the read when the wait runs out, refuses a value that
 * is not a commit timestamp), reports its role and how far it follows, and answers unavailable when it has lost
 * its primary, until a standby takes over.
 */
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { type Running, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"
import { createTestDatabase } from "../support/postgres.ts"

const scratch = scratchDirectories()
/** A package whose SearchParameter and StructureDefinition resources make SearchParameter a type to write. */
const conformanceSearch = fileURLToPath(new URL("../fixtures/packages/conformance-search", import.meta.url))
const env = { SVC_CLUSTER_LEASE_SECONDS: "2" }

const running: Array<Running> = []
afterAll(async () => {
  await Promise.all(running.map((process) => process.stop("SIGKILL")))
})

const start = async (args: ReadonlyArray<string>) => {
  const started = await startSvc(args, { cwd: scratch(), env })
  running.push(started)
  return started
}

const json = async (reply: Response) => ({ status: reply.status, headers: reply.headers, body: (await reply.json()) as any })

/** The request log lines a server wrote for `method` and `path`. */
const logged = (server: Running, method: string, path: string) =>
  server.lines().filter((line) => line.startsWith("{")).map((line) => JSON.parse(line)).filter((line) => line.message === "request" && line.method === method && line.path === path)

describe("a replica on Postgres", async () => {
  const { available, url } = await suiteDatabase()

  it.skipIf(!available)("serves reads, forwards writes with the primary's answer, honours X-Svc-Min-Ts, and is unavailable without a primary", async () => {
    const primary = await start(["--postgres", url(), "--package", conformanceSearch])
    await primary.logged("serving")
    const replica = await start(["--postgres", url(), "--package", conformanceSearch, "--role", "replica", "--primary-url", primary.url])
    await replica.logged("serving")
    const health = await json(await fetch(`${replica.url}/healthz?verbose=1`))
    expect(health).toMatchObject({ status: 200, body: { status: "ok", role: "replica", following: { commit_ts: expect.any(Number) } } })

    // A create through the replica is the primary's: its status, Location, ETag and X-Svc-Commit-Ts come back.
    const created = await fetch(`${replica.url}/fhir/Patient`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({ resourceType: "Patient", name: [{ family: "Relayed" }] })
    })
    expect(created.status).toBe(201)
    const patient = (await created.json()) as { id: string }
    expect(created.headers.get("location")).toContain(`/fhir/Patient/${patient.id}/_history/1`)
    expect(created.headers.get("etag")).toBe('W/"1"')
    const commitTs = created.headers.get("x-svc-commit-ts")!
    expect(commitTs).toMatch(/^\d+$/)
    await primary.loggedWhere((line) => line.message === "request" && line.method === "POST" && line.path === "/fhir/Patient")
    expect(logged(replica, "POST", "/fhir/Patient")).toHaveLength(0)

    // Read at that commit on the replica: it answers itself, with the write.
    const read = await json(await fetch(`${replica.url}/fhir/Patient/${patient.id}`, { headers: { "x-svc-min-ts": commitTs } }))
    expect([read.status, read.body.id]).toEqual([200, patient.id])
    await replica.loggedWhere((line) => line.message === "request" && line.method === "GET" && line.path === `/fhir/Patient/${patient.id}`)
    expect(logged(primary, "GET", `/fhir/Patient/${patient.id}`)).toHaveLength(0)

    // A commit the replica will not see within the wait: the read goes to the primary.
    const future = String(Number(commitTs) + 3_600_000_000)
    const forwarded = await json(await fetch(`${replica.url}/fhir/Patient/${patient.id}`, { headers: { "x-svc-min-ts": future } }))
    expect([forwarded.status, forwarded.body.id]).toEqual([200, patient.id])
    await primary.loggedWhere((line) => line.message === "request" && line.method === "GET" && line.path === `/fhir/Patient/${patient.id}`)
    expect(logged(replica, "GET", `/fhir/Patient/${patient.id}`)).toHaveLength(1)

    const bad = await json(await fetch(`${replica.url}/fhir/Patient/${patient.id}`, { headers: { "x-svc-min-ts": "yesterday" } }))
    expect(bad.status).toBe(400)
    expect(bad.body.issue[0].diagnostics).toContain("X-Svc-Min-Ts")

    // A transaction Bundle through the replica, and a search on the replica that sees it once it has the commit.
    const bundle = await fetch(`${replica.url}/fhir`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({
        resourceType: "Bundle",
        type: "transaction",
        entry: [{ resource: { resourceType: "Patient", name: [{ family: "Relayed" }] }, request: { method: "POST", url: "Patient" } }]
      })
    })
    expect(bundle.status).toBe(200)
    const search = await json(await fetch(`${replica.url}/fhir/Patient?family=Relayed`, { headers: { "x-svc-min-ts": bundle.headers.get("x-svc-commit-ts")! } }))
    expect(search.body.entry).toHaveLength(2)

    // A SearchParameter written through the replica: once the replica has its commit, its catalog has the
    // parameter, and a search with it is served by the replica. A Patient written before the primary's catalog
    // has the parameter is indexed for it by the primary's backfill: the search waits for that.
    const generation = (await json(await fetch(`${primary.url}/healthz?verbose=1`))).body.catalog.generation as number
    const parameter = await fetch(`${replica.url}/fhir/SearchParameter`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({
        resourceType: "SearchParameter", url: "http://example.org/fhir/SearchParameter/patient-surname", name: "surname", status: "active",
        description: "A patient's family name", code: "surname", base: ["Patient"], type: "string", expression: "Patient.name.family"
      })
    })
    expect(parameter.status).toBe(201)
    const named = await fetch(`${replica.url}/fhir/Patient`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({ resourceType: "Patient", name: [{ family: "Surnamed" }] })
    })
    await primary.loggedWhere((line) => line.message === "search index backfilled" && Number(line.generation) > generation)
    const bySurname = await json(await fetch(`${replica.url}/fhir/Patient?surname=Surnamed`, { headers: { "x-svc-min-ts": named.headers.get("x-svc-commit-ts")! } }))
    expect([bySurname.status, bySurname.body.entry?.length]).toEqual([200, 1])
    await replica.loggedWhere((line) => line.message === "request" && line.method === "GET" && line.path === "/fhir/Patient" && line.status === 200)
    expect(logged(primary, "GET", "/fhir/Patient")).toHaveLength(0)

    // The primary gone and no standby: the replica is unavailable; a standby that takes over makes it ready again.
    await primary.stop("SIGKILL")
    await replica.logged("no primary holds the writer lease: this replica is unavailable until one does")
    const lost = await json(await fetch(`${replica.url}/readyz`))
    expect([lost.status, lost.body]).toEqual([503, { status: "unavailable", reason: "replica: not following the primary's changes" }])
    const standby = await start(["--postgres", url(), "--standby"])
    await standby.logged("serving")
    await replica.logged("a primary holds the writer lease again: following it")
    expect((await fetch(`${replica.url}/readyz`)).status).toBe(200)
  }, 120_000)

  it.skipIf(!available)("is starting until the primary has made the database, then serves", async () => {
    const database = await createTestDatabase()
    try {
      // The primary's URL is not known yet; nothing is forwarded before it serves.
      const replica = await start(["--postgres", database.url, "--role", "replica", "--primary-url", "http://127.0.0.1:9"])
      await replica.logged("replica: waiting for the primary to migrate the database")
      const waiting = await json(await fetch(`${replica.url}/readyz`))
      expect([waiting.status, waiting.body]).toEqual([503, { status: "starting", reason: "replica: waiting for the primary to migrate the database and install its packages" }])
      const primary = await start(["--postgres", database.url])
      await primary.logged("serving")
      await replica.logged("serving")
      expect((await fetch(`${replica.url}/readyz`)).status).toBe(200)
      expect(replica.lines().some((line) => line.includes("applied migration"))).toBe(false)
    } finally {
      await Promise.all(running.splice(0).map((process) => process.stop("SIGKILL")))
      await database.drop()
    }
  }, 120_000)
})
