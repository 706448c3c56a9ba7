/**
 * Export jobs across processes (docs/export.md, "Jobs"), as real `svc` processes: on a SQLite file, a server
 * killed (kill -9) while it writes a job, then started again, resumes the job and completes it with every
 * resource once; on Postgres, a primary stopped (SIGSTOP) while it writes a job loses its writer lease to the
 * standby, which takes the job over at once (its lease was taken under an older writer epoch) and completes it,
 * while the old primary, let go on, writes nothing that is served and exits. The files are in `--export-dir`.
 * The writer lease is 2 seconds here.
 */
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { postgresAvailable, createTestDatabase } from "../support/postgres.ts"
import { type Running, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()
const env = { SVC_CLUSTER_LEASE_SECONDS: "2" }
const running: Array<Running> = []
afterAll(async () => {
  await Promise.all(running.map((process) => process.stop("SIGKILL")))
})

const start = async (args: ReadonlyArray<string>, cwd: string) => {
  const started = await startSvc(args, { cwd, env })
  running.push(started)
  return started
}

const patientCount = 12_000

/** Loads `patientCount` patients (with enough to them that the export takes a while), in transaction Bundles. */
const load = async (server: Running) => {
  const ids: Array<string> = []
  for (let start = 0; start < patientCount; start += 2000) {
    const entry = Array.from({ length: 2000 }, (_, i) => ({
      request: { method: "POST", url: "Patient" },
      resource: {
        resourceType: "Patient",
        name: [{ family: `Family${start + i}`, given: ["Given", "Names", "Several"] }],
        address: [{ line: [`${start + i} Long Street Name`], city: "Somewhere", postalCode: "12345", country: "Nowhere" }],
        telecom: [{ system: "phone", value: "+00 000 000 000" }, { system: "email", value: `patient${start + i}@example.org` }]
      }
    }))
    const reply = await fetch(`${server.url}/fhir`, {
      method: "POST",
      headers: { "content-type": "application/fhir+json" },
      body: JSON.stringify({ resourceType: "Bundle", type: "transaction", entry })
    })
    expect(reply.status).toBe(200)
    const bundle = (await reply.json()) as { entry: Array<{ response: { location: string } }> }
    ids.push(...bundle.entry.map((e) => e.response.location.split("/")[1]!))
  }
  return ids.sort()
}

/** Kicks off a Patient export on `server`: the job's path (`/export/{id}`). */
const kickOff = async (server: Running) => {
  const reply = await fetch(`${server.url}/fhir/$export?_type=Patient`, { headers: { prefer: "respond-async" } })
  expect(reply.status).toBe(202)
  return new URL(reply.headers.get("content-location")!).pathname
}

/** The job's manifest from `server`, waiting for its end (Prefer: wait), and the ids of its files' resources. */
const exportedIds = async (server: Running, path: string) => {
  let reply: Response | undefined
  for (let polls = 0; polls < 10; polls++) {
    reply = await fetch(`${server.url}${path}`, { headers: { prefer: "wait=30" } })
    if (reply.status !== 202) break
  }
  expect(reply!.status).toBe(200)
  const manifest = (await reply!.json()) as { output: Array<{ url: string; count: number }> }
  const ids: Array<string> = []
  for (const output of manifest.output) {
    // The manifest's URLs name the server that answered; the files are the same through any server.
    const file = await fetch(`${server.url}${new URL(output.url).pathname}${new URL(output.url).search}`)
    expect(file.status).toBe(200)
    const lines = (await file.text()).split("\n").filter((line) => line !== "")
    expect(lines.length).toBe(output.count)
    ids.push(...lines.map((line) => (JSON.parse(line) as { id: string }).id))
  }
  return ids.sort()
}

const started = (server: Running, job: string) =>
  server.loggedWhere((entry) => entry["message"] === "export job started" && entry["job"] === job)

describe("export jobs across processes", async () => {
  it("resume after a kill -9 and a restart on a SQLite file, every resource once", async () => {
    const cwd = scratch()
    const args = ["--sqlite", join(cwd, "svc.sqlite"), "--export-dir", join(cwd, "exports")]
    const first = await start(args, cwd)
    await first.logged("serving")
    const ids = await load(first)
    const path = await kickOff(first)
    const job = path.split("/")[2]!
    await started(first, job)
    await first.stop("SIGKILL")
    expect(first.lines().some((line) => line.includes("export job completed"))).toBe(false)

    const second = await start(args, cwd)
    await second.logged("serving")
    const resumed = await started(second, job)
    expect(resumed["start"]).toBe(2)
    expect(await exportedIds(second, path)).toEqual(ids)
    // The files are where --export-dir says, one directory per job.
    expect(readdirSync(join(cwd, "exports"))).toEqual([job])
    expect(readdirSync(join(cwd, "exports", job)).some((name) => name.startsWith("2-Patient."))).toBe(true)
    await second.stop()
  }, 240_000)

  it("keep nothing with --memory: the jobs and their files are gone when the server stops", async () => {
    const cwd = scratch()
    const server = await start(["--memory"], cwd)
    await server.logged("serving")
    const dir = String((await server.logged("export files"))["dir"])
    const created = await fetch(`${server.url}/fhir/Patient`, { method: "POST", headers: { "content-type": "application/fhir+json" }, body: JSON.stringify({ resourceType: "Patient" }) })
    expect(created.status).toBe(201)
    const path = await kickOff(server)
    expect(await exportedIds(server, path)).toHaveLength(1)
    expect(readdirSync(dir)).toEqual([path.split("/")[2]])
    expect((await server.stop()).code).toBe(0)
    expect(existsSync(dir)).toBe(false)
    const again = await start(["--memory"], cwd)
    await again.logged("serving")
    expect((await fetch(`${again.url}${path}`)).status).toBe(404)
    await again.stop()
  }, 120_000)

  const pg = await postgresAvailable()
  it.skipIf(!pg)("are taken over by the standby when the primary is stopped mid-job, every resource once, nothing of the old primary served", async () => {
    const database = await createTestDatabase()
    try {
      const cwd = scratch()
      const exports = join(cwd, "exports")
      const primary = await start(["--postgres", database.url, "--export-dir", exports], cwd)
      await primary.logged("serving")
      const standby = await start(["--postgres", database.url, "--export-dir", exports, "--standby"], cwd)
      await standby.logged("listening")
      const ids = await load(primary)
      const path = await kickOff(primary)
      const job = path.split("/")[2]!
      await started(primary, job)
      primary.child.kill("SIGSTOP")
      // The writer lease runs out; the standby takes it, then the job at once (taken under the older epoch).
      await standby.logged("serving")
      const taken = await started(standby, job)
      expect(taken["start"]).toBe(2)
      primary.child.kill("SIGCONT")
      const ended = await primary.stop("SIGCONT")
      expect(ended.code).toBe(1)
      expect(await exportedIds(standby, path)).toEqual(ids)
      expect(existsSync(join(exports, job))).toBe(true)
    } finally {
      await Promise.all(running.splice(0).map((process) => process.stop("SIGKILL")))
      await database.drop()
    }
  }, 240_000)
})
