/**
 * Export jobs against the database on SQLite and Postgres (src/export/jobs.ts, jobRun.ts): the lease rules with
 * Effect's TestClock (a lease that runs out is taken over by another server, a newer writer-lease epoch or the one
 * process of a SQLite file takes it at once, three starts without finishing fail the job), a worker stopped after
 * writing past its last checkpoint and a second one that resumes with every resource exactly once, and the
 * snapshot: resources as they were at the job's transaction commit.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { Writer } from "../../src/db/Writer.ts"
import { type ExportSpec, insertJob, type Job, readJob, takeJob, type WorkerId } from "../../src/export/jobs.ts"
import { Exports } from "../../src/export/Exports.ts"
import { exportRoutes } from "../../src/export/routes.ts"
import { removeJobFiles, runJob, type WorkerContext } from "../../src/export/jobRun.ts"
import { deleteResource, putVersion } from "../../src/store/versions.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const spec = (types: ReadonlyArray<string>): ExportSpec => ({ level: "system", types, filters: {}, warnings: [] })

const newJob = (id: string, transactionTs: number, types: ReadonlyArray<string> = ["Patient"]) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    yield* insertJob(db, writer, { id, owner: "", caller: { _tag: "Anonymous" }, request: "http://x/fhir/$export", spec: spec(types), transactionTs })
  })

const take = (worker: WorkerId) =>
  Effect.gen(function*() {
    return yield* takeJob(yield* Database, yield* Writer, worker)
  })

const job = (id: string) => Effect.flatMap(Database, (db) => readJob(db.writer, id))

/** Writes `resource` as a new version, at the next commit: its commit timestamp. */
const write = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const { commitTs } = yield* writer.commit(({ commitTs }) =>
      putVersion(db.writer, { type: String(resource["resourceType"]), id: String(resource["id"]), resource, commitTs })
    )
    return commitTs
  })

/** The lines of the files of a finished job, each read up to the length its entry records, as the endpoint serves them. */
const served = (dir: string, finished: Job) =>
  finished.progress.files.filter((file) => file.error !== true).flatMap((file) =>
    readFileSync(join(dir, finished.id, file.disk)).subarray(0, file.bytes).toString("utf8").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
  )

/** `GET /export/{id}` as the endpoint answers it, for a caller without a token and no --smart. */
const status = (id: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const handler = exportRoutes({ smart: false, root: "http://127.0.0.1:8080" })["/export/{job}"]!
    const response = yield* handler({
      http: HttpServerRequest.fromWeb(new Request(`http://127.0.0.1:8080/export/${id}`)),
      path: `/export/${id}`,
      params: { job: id },
      principal: { _tag: "Anonymous", address: "127.0.0.1" }
    }).pipe(Effect.provideService(Exports, Exports.of({
      kickOff: () => Effect.die("not used"),
      job: (job) => readJob(db.writer, job),
      cancel: () => Effect.succeed(false),
      awaitEnd: () => Effect.void,
      dir: ""
    })))
    const web = HttpServerResponse.toWeb(response)
    return { status: web.status, body: (yield* Effect.promise(() => web.json())) as any }
  })

const A: WorkerId = { holder: "server-a", epoch: 1, exclusive: false }
const B: WorkerId = { holder: "server-b", epoch: 1, exclusive: false }

for (const backend of backends) {
  describe.skipIf(backend.skip)(`export jobs on ${backend.kind}`, () => {
    it.scoped("are taken over when their lease runs out, at once by a newer writer epoch or the one process of a SQLite file, and fail after 3 starts", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* newJob("11111111-1111-4111-8111-111111111111", 0)
        const first = yield* take(A)
        expect([first?.state, first?.starts, first?.leaseHolder]).toEqual(["running", 1, "server-a"])
        // Another server of the same writer epoch waits for the lease to run out.
        expect(yield* take(B)).toBeUndefined()
        yield* TestClock.adjust("29 seconds")
        expect(yield* take(B)).toBeUndefined()
        yield* TestClock.adjust("2 seconds")
        const second = yield* take(B)
        expect([second?.starts, second?.leaseHolder]).toEqual([2, "server-b"])
        // A server under a newer writer-lease epoch (a standby that took over) takes it at once.
        const third = yield* take({ holder: "server-c", epoch: 2, exclusive: false })
        expect([third?.starts, third?.leaseHolder]).toEqual([3, "server-c"])
        // Started three times without finishing: failed, not started again, and never taken after.
        yield* TestClock.adjust("31 seconds")
        expect(yield* take(A)).toBeUndefined()
        const failed = yield* job("11111111-1111-4111-8111-111111111111")
        expect(failed?.state).toBe("failed")
        expect(failed?.message).toContain("started 3 times without finishing")
        // Its status: a 500 OperationOutcome saying why.
        const answer = yield* status("11111111-1111-4111-8111-111111111111")
        expect(answer.status).toBe(500)
        expect(answer.body.resourceType).toBe("OperationOutcome")
        expect(answer.body.issue[0].code).toBe("exception")
        expect(answer.body.issue[0].diagnostics).toMatch(/^export job 11111111-1111-4111-8111-111111111111 failed: the export was started 3 times without finishing/)
        yield* TestClock.adjust("1 hour")
        expect(yield* take({ holder: "server-d", epoch: 9, exclusive: true })).toBeUndefined()
        expect((yield* job("11111111-1111-4111-8111-111111111111"))?.starts).toBe(3)

        // The one process that can open a SQLite file takes another holder's job at once.
        yield* newJob("22222222-2222-4222-8222-222222222222", 0)
        expect((yield* take(A))?.id).toBe("22222222-2222-4222-8222-222222222222")
        const restarted = yield* take({ holder: "after-restart", epoch: 0, exclusive: true })
        expect([restarted?.starts, restarted?.leaseHolder]).toEqual([2, "after-restart"])
      })))

    it.scoped("resume after a worker stopped past its last checkpoint: every resource once, as of the transaction commit", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const dir = mkdtempSync(join(tmpdir(), "svc-export-test-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const total = 2500
        const ids = Array.from({ length: total }, (_, i) => `p${String(i).padStart(5, "0")}`)
        const db = yield* Database
        const writer = yield* Writer
        yield* writer.commit(({ commitTs }) =>
          Effect.forEach(ids, (id) => putVersion(db.writer, { type: "Patient", id, resource: { resourceType: "Patient", id, gender: "female" }, commitTs }), { discard: true })
        )
        yield* write({ resourceType: "Observation", id: "o1", status: "final", code: { text: "before" } })
        const transactionTs = yield* write({ resourceType: "Observation", id: "o2", status: "final", code: { text: "before" } })
        // After the transaction commit: an update, a delete and a create, none of which the export shows.
        yield* write({ resourceType: "Patient", id: "p00007", gender: "male" })
        yield* writer.commit(({ commitTs }) => deleteResource(db.writer, { type: "Patient", id: "p00008", commitTs }))
        yield* write({ resourceType: "Patient", id: "zz-later", gender: "other" })
        yield* write({ resourceType: "Observation", id: "o1", status: "amended", code: { text: "after" } })

        const id = "33333333-3333-4333-8333-333333333333"
        yield* newJob(id, transactionTs, ["Patient", "Observation"])
        const context = (worker: WorkerId, commits: WorkerContext["writer"]): WorkerContext => ({
          db,
          writer: commits,
          catalog: Effect.succeed({} as Catalog),
          dir,
          maxFileBytes: 1024 * 1024,
          worker
        })
        // The first server writes two batches (100 resources, then as many as fit in 4 MiB), but its second
        // checkpoint never commits: it stops there (killed).
        let checkpoints = 0
        const stalling: WorkerContext["writer"] = {
          ...writer,
          commit: (command) => (++checkpoints === 2 ? Effect.never : writer.commit(command))
        }
        const started = yield* take(A)
        const running = yield* Effect.fork(runJob(context(A, stalling), started!))
        while (checkpoints < 2) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        yield* Fiber.interrupt(running)
        const stopped = yield* job(id)
        expect([stopped?.state, stopped?.progress.written]).toEqual(["running", 100])

        // The second server (a newer epoch) resumes after the last id recorded, in a file of its own.
        const resumed = yield* take({ holder: "server-b", epoch: 2, exclusive: false })
        expect(resumed?.starts).toBe(2)
        expect(yield* runJob(context({ holder: "server-b", epoch: 2, exclusive: false }, writer), resumed!)).toBe("completed")
        const finished = (yield* job(id))!
        expect(finished.state).toBe("completed")
        const files = finished.progress.files
        // The stopped server's file, then the resuming server's (a start never writes into another's file).
        expect(files.map((file) => [file.type, file.name, file.disk])).toEqual([
          ["Patient", "Patient.1.ndjson", "1-Patient.1.ndjson"],
          ["Patient", "Patient.2.ndjson", "2-Patient.2.ndjson"],
          ["Observation", "Observation.1.ndjson", "2-Observation.1.ndjson"]
        ])
                // The first file holds more than its recorded length (the second batch of the stopped server): never served.
        const first = files[0]!
        expect(first.count).toBe(100)
        expect(readFileSync(join(dir, id, first.disk)).length).toBeGreaterThan(first.bytes)

        const resources = served(dir, finished)
        const patients = resources.filter((r) => r.resourceType === "Patient")
        // Deleted, changed or created after the transaction commit: as they were then, or not at all.
        expect(patients.map((p) => p.id)).toEqual(ids)
        expect(patients.find((p) => p.id === "p00007")).toMatchObject({ gender: "female", meta: { versionId: "1" } })
        expect(patients.find((p) => p.id === "p00008")).toMatchObject({ gender: "female", meta: { versionId: "1" } })
        expect(resources.filter((r) => r.resourceType === "Observation").map((o) => [o.id, o.status])).toEqual([["o1", "final"], ["o2", "final"]])
        expect(files.reduce((sum, file) => sum + file.count, 0)).toBe(resources.length)

        yield* removeJobFiles(dir, id)
        expect(readdirSync(dir)).toEqual([])
      })), 120_000)
  })
}
