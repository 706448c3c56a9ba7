/**
 * The export job endpoints (docs/export.md, "Status" and "Files"): `GET` and `DELETE /export/{job}`, and
 * `GET /export/{job}/file?name=...`. Under `--smart` they need a token of the client that started the job; to
 * anyone else (and for a job that is unknown, cancelled or past keeping) the answer is 404, so that a job's
 * existence says nothing to another client. Files are served from the job's directory only, by a name its
 * manifest lists, up to the length recorded for them.
 */
import { HttpServerResponse } from "@effect/platform"
import { NodeStream } from "@effect/platform-node"
import { Clock, Duration, Effect } from "effect"
import { createReadStream } from "node:fs"
import { stat } from "node:fs/promises"
import { join, relative, resolve, sep } from "node:path"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import { preferredWait } from "../rest/prefer.ts"
import type { Principal } from "../http/Principal.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import { Exports, keptMillis } from "./Exports.ts"
import type { Job, OutputFile } from "./jobs.ts"
import { jobDirectory } from "./jobRun.ts"

export interface ExportRouteOptions {
  /** `--smart`: the endpoints need the owner's token, and the manifest says `requiresAccessToken`. */
  readonly smart: boolean
  /** The server's public root (`server.public_url`, else the listening address), for the manifest's URLs. */
  readonly root: string
}

/** Seconds a client is asked to wait before polling again. */
const retryAfterSeconds = 2

const notFound = (id: string) => outcomeResponse("not-found", `no export job ${id} is known here (it may have been cancelled, or removed after 24 hours)`)

/** 401 without a token under `--smart`. */
const unauthenticated = (smart: boolean, principal: Principal): HttpServerResponse.HttpServerResponse | undefined =>
  smart && principal._tag !== "Authorized"
    ? outcomeResponse("login", "the export endpoints need the bearer token of the client that started the job", {
      status: 401,
      headers: { "www-authenticate": "Bearer" }
    })
    : undefined

/** Whether `principal` may see `job`: its owner (any caller when the job was started without a token and there is no `--smart`). */
const owns = (job: Job, principal: Principal, smart: boolean): boolean =>
  job.owner === "" ? !smart : principal._tag === "Authorized" && job.owner === `client:${principal.clientId}`

/** The job if `request`'s caller may see it; else the answer to give. */
const visibleJob = (request: RootRequest, options: ExportRouteOptions) =>
  Effect.gen(function*() {
    const refused = unauthenticated(options.smart, request.principal)
    if (refused !== undefined) return refused
    const id = request.params["job"] ?? ""
    const exports = yield* Exports
    const job = yield* exports.job(id)
    if (job === undefined || job.state === "cancelled" || !owns(job, request.principal, options.smart)) return notFound(id)
    return job
  })

const isResponse = (value: Job | HttpServerResponse.HttpServerResponse): value is HttpServerResponse.HttpServerResponse => HttpServerResponse.isServerResponse(value)

const instant = (commitTs: number): string => {
  const millis = Math.floor(commitTs / 1000)
  const micros = String(commitTs % 1_000_000).padStart(6, "0")
  return `${new Date(millis).toISOString().slice(0, 19)}.${micros}Z`
}

const fileUrl = (options: ExportRouteOptions, job: Job, file: OutputFile) =>
  `${options.root}/export/${job.id}/file?name=${encodeURIComponent(file.name)}`

/** The Bulk Data manifest of a completed job. */
export const manifestOf = (job: Job, options: ExportRouteOptions) => ({
  transactionTime: instant(job.transactionTs),
  request: job.request,
  requiresAccessToken: options.smart,
  output: job.progress.files.filter((file) => file.error !== true && file.count > 0).map((file) => ({ type: file.type, url: fileUrl(options, job, file), count: file.count })),
  error: job.progress.files.filter((file) => file.error === true).map((file) => ({ type: "OperationOutcome", url: fileUrl(options, job, file), count: file.count }))
})

/** What `X-Progress` says of a job that is not done. */
const progressText = (job: Job): string => {
  if (job.state === "queued") return "queued"
  const type = job.spec.types[job.progress.type]
  return `running: ${job.progress.written} resources written${type === undefined ? "" : `; ${type}`}`
}

/** `Prefer: wait=N` (RFC 7240): how long a status request may wait for the job to end, at most a minute. */
const waitOf = (request: RootRequest): Duration.Duration | undefined => preferredWait(request.http.headers["prefer"], Duration.minutes(1))

/** `GET /export/{job}`. */
const status = (request: RootRequest, options: ExportRouteOptions) =>
  Effect.gen(function*() {
    let found = yield* visibleJob(request, options)
    if (isResponse(found)) return found
    const wait = waitOf(request)
    if (wait !== undefined && (found.state === "queued" || found.state === "running")) {
      yield* (yield* Exports).awaitEnd(found.id, wait)
      found = yield* visibleJob(request, options)
      if (isResponse(found)) return found
    }
    const job = found
    switch (job.state) {
      case "queued":
      case "running":
        return HttpServerResponse.text(JSON.stringify({
          resourceType: "OperationOutcome",
          issue: [{ severity: "information", code: "informational", diagnostics: `export job ${job.id}: ${progressText(job)}` }]
        }), {
          status: 202,
          contentType: "application/fhir+json; charset=utf-8",
          headers: { "x-progress": progressText(job), "retry-after": String(retryAfterSeconds) }
        })
      case "failed":
        return outcomeResponse("exception", `export job ${job.id} failed: ${job.message ?? "no reason was recorded"}`, { status: 500 })
      default: {
        const finishedAt = job.finishedAt ?? (yield* Clock.currentTimeMillis)
        const expires = new Date(finishedAt + keptMillis).toUTCString()
        return HttpServerResponse.text(JSON.stringify(manifestOf(job, options)), {
          status: 200,
          contentType: "application/json",
          headers: { expires }
        })
      }
    }
  })

/** `DELETE /export/{job}`: cancels it, or discards what it wrote. */
const cancel = (request: RootRequest, options: ExportRouteOptions) =>
  Effect.gen(function*() {
    const found = yield* visibleJob(request, options)
    if (isResponse(found)) return found
    const exports = yield* Exports
    const cancelled = yield* exports.cancel(found.id)
    if (!cancelled) return notFound(found.id)
    return HttpServerResponse.text(JSON.stringify({
      resourceType: "OperationOutcome",
      issue: [{ severity: "information", code: "informational", diagnostics: `export job ${found.id} was ${found.state === "completed" || found.state === "failed" ? "discarded" : "cancelled"}; its files are removed` }]
    }), { status: 202, contentType: "application/fhir+json; charset=utf-8" })
  })

/** `GET /export/{job}/file?name=...`: the file, streamed from the disk up to its recorded length. */
const file = (request: RootRequest, options: ExportRouteOptions) =>
  Effect.gen(function*() {
    const found = yield* visibleJob(request, options)
    if (isResponse(found)) return found
    const job = found
    const name = new URL(request.http.url, "http://localhost").searchParams.get("name")
    if (name === null) return outcomeResponse("required", "a file is named by the query parameter 'name', as the manifest's url gives it", { status: 400 })
    const entry = job.state === "completed" ? job.progress.files.find((candidate) => candidate.name === name) : undefined
    if (entry === undefined) return outcomeResponse("not-found", `export job ${job.id} has no file ${JSON.stringify(name)}${job.state === "completed" ? "" : " (it is not completed)"}`)
    const exports = yield* Exports
    const directory = resolve(jobDirectory(exports.dir, job.id))
    const path = resolve(join(directory, entry.disk))
    const inside = relative(directory, path)
    if (inside === "" || inside.startsWith("..") || inside.includes(sep)) return notFound(job.id)
    const size = yield* Effect.promise(() => stat(path).then((stats) => stats.size, () => -1))
    if (size < entry.bytes) {
      yield* Effect.logError("an export file is missing or shorter than recorded", { job: job.id, file: entry.name })
      return outcomeResponse("exception", `the file ${entry.name} of export job ${job.id} is missing from the export directory; see the server log`, { status: 500 })
    }
    if (entry.bytes === 0) return HttpServerResponse.text("", { status: 200, contentType: "application/fhir+ndjson" })
    const body = NodeStream.fromReadable(
      () => createReadStream(path, { start: 0, end: entry.bytes - 1 }),
      (error) => new Error(`export file ${path}: ${error instanceof Error ? error.message : String(error)}`)
    )
    return HttpServerResponse.stream(body, { status: 200, contentType: "application/fhir+ndjson", contentLength: entry.bytes })
  })

/** The handlers of the export endpoints, by path of the root table (src/http/RootRoutes.ts). */
export const exportRoutes = (options: ExportRouteOptions): Readonly<Record<string, RootHandler<unknown, Exports>>> => ({
  "/export/{job}": (request) => (request.http.method === "DELETE" ? cancel(request, options) : status(request, options)),
  "/export/{job}/file": (request) => file(request, options)
})
