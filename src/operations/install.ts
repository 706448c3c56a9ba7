/**
 * `$install` (spec: Operations; docs/operations.md, "$install"): installs a FHIR package while the server serves.
 * FHIR R4 defines no such operation (https://hl7.org/fhir/R4/operations.html leaves servers their own): its
 * parameters are this server's, declared below and under `installDefinition`.
 *
 * - `POST [base]/$install` with `package` (`name@version`), or `name` and `version`, from the configured package
 *   sources; or `url`, a tarball within one of them (a registry's origin, `s3://` of its bucket); or the `.tgz`
 *   itself, as the body (`application/gzip`, `application/octet-stream`) or as `archive` (base64Binary) of a
 *   Parameters body. One of these, once.
 * - Synchronous by default: 200 with a Parameters naming each package, what it installed and the catalog
 *   generation that holds it. `Prefer: respond-async`: 202 with `Content-Location: [base]/$install?_job={id}`.
 * - `GET [base]/$install?_job={id}`: 202 with `X-Progress` while the job runs, then the answer the synchronous
 *   call would have given (200, or the failure's OperationOutcome). `Prefer: wait=N` waits up to N seconds.
 * - `GET [base]/$install`: the installed packages.
 *
 * Access: the registry's default check, every permission on every type (a system-level operation).
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Duration, Effect, Exit, Option } from "effect"
import { fail, type FhirError } from "../http/FhirError.ts"
import type { InstalledPackage } from "../packages/Installer.ts"
import {
  type InstallFailure,
  type InstallReport,
  type InstallRequest,
  keptJobs,
  PackageInstalls
} from "../packages/PackageInstalls.ts"
import { parse } from "../packages/PackageSpec.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { bodyBuffer } from "../rest/RequestBody.ts"
import { preferredWait, prefersAsync } from "../rest/prefer.ts"
import { resourceBody } from "../rest/respond.ts"
import { definedInputs, type InputParameter, readArguments, withExtras } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"

/** The canonical of `$install`'s definition: this server's own (docs/operations.md lists its parameters). */
export const installDefinition = "urn:svc:OperationDefinition:install"

/** `$install`'s input parameters (docs/operations.md, "$install"). */
export const installInputs: ReadonlyArray<InputParameter> = [
  { name: "package", type: "string", min: 0, max: "1" },
  { name: "name", type: "string", min: 0, max: "1" },
  { name: "version", type: "string", min: 0, max: "1" },
  { name: "url", type: "uri", min: 0, max: "1" },
  { name: "archive", type: "base64Binary", min: 0, max: "1" },
  { name: "_job", type: "string", min: 0, max: "1" }
]

/** The media types of a `.tgz` sent as the body. */
const archiveTypes: ReadonlySet<string> = new Set(["application/gzip", "application/x-gzip", "application/tar+gzip", "application/octet-stream"])

/** `Prefer: wait=N` on a status request waits at most this long. */
const longestWait = Duration.seconds(60)

const mediaType = (value: string | undefined): string => (value ?? "").split(";")[0]!.trim().toLowerCase()

const hasBody = (request: FhirRequest): boolean =>
  Number(request.http.headers["content-length"] ?? "0") > 0 || request.http.headers["transfer-encoding"] !== undefined

const respondAsync = (request: FhirRequest): boolean => prefersAsync(request.http.headers["prefer"])

/** `Prefer: wait=N` (RFC 7240), at most `longestWait`. */
const waitOf = (request: FhirRequest): Duration.Duration | undefined => preferredWait(request.http.headers["prefer"], longestWait)

const base64 = /^[A-Za-z0-9+/]*={0,2}$/

/** The package asked for, from the arguments given (exactly one way of naming it). */
const requestOf = (values: URLSearchParams) =>
  Effect.gen(function*() {
    const given = ["package", "name", "url", "archive"].filter((name) => values.has(name))
    if (values.has("version") && !values.has("name")) return yield* fail("invalid", "$install: 'version' goes with 'name'")
    if (given.length === 0) {
      return yield* fail("required", "$install needs the package: 'package' (name@version), 'name' and 'version', 'url', or the .tgz as the body or 'archive'")
    }
    if (given.length > 1) return yield* fail("invalid", `$install takes one package, named one way; it was given ${given.map((name) => `'${name}'`).join(" and ")}`)
    const text = (name: string) => values.get(name)!
    switch (given[0]) {
      case "package":
      case "name": {
        const spec = given[0] === "package" ? text("package") : `${text("name")}@${values.get("version") ?? "latest"}`
        const parsed = yield* Effect.mapError(parse(spec), (error) => fail("invalid", `$install: ${error.message}`))
        if (parsed._tag !== "Named") {
          return yield* fail("invalid", `$install: '${spec}' is not name@version (a file on the server is not taken: send the .tgz as the body, or give its url)`)
        }
        return { _tag: "Named", name: parsed.name, version: parsed.version } satisfies InstallRequest
      }
      case "url": {
        const url = text("url")
        if (!URL.canParse(url)) return yield* fail("invalid", `$install: the url '${url}' is not a URL`)
        const parsed = new URL(url)
        if (!["http:", "https:", "s3:"].includes(parsed.protocol)) return yield* fail("invalid", `$install: the url must be http(s):// or s3://, not ${parsed.protocol}`)
        if (parsed.username !== "" || parsed.password !== "") return yield* fail("invalid", "$install: the url may not carry a user name or password")
        return { _tag: "Reference", url } satisfies InstallRequest
      }
      default: {
        const encoded = text("archive").replace(/\s+/g, "")
        if (!base64.test(encoded) || encoded.length % 4 !== 0) return yield* fail("invalid", "$install: 'archive' is not base64")
        return { _tag: "Archive", bytes: Buffer.from(encoded, "base64") } satisfies InstallRequest
      }
    }
  })

/** What the POST asks to install: an archive as the body, or arguments of the query and a Parameters body. */
const readRequest = (request: FhirRequest, accepted: ReadonlyArray<InputParameter>) =>
  Effect.gen(function*() {
    if (hasBody(request) && archiveTypes.has(mediaType(request.http.headers["content-type"]))) {
      const bytes = yield* bodyBuffer(request.http, request.maxBodyBytes)
      const { values } = yield* readArguments(request, "$install", accepted, { resourceType: "Parameters" })
      if ([...values.keys()].length > 0) {
        return yield* fail("invalid", `$install with a .tgz body takes no other parameters; it was given ${[...new Set(values.keys())].join(", ")}`)
      }
      return { _tag: "Archive", bytes } satisfies InstallRequest
    }
    const { values } = yield* readArguments(request, "$install", accepted)
    if (values.has("_job")) return yield* fail("invalid", "$install: '_job' asks for a job's status, with GET")
    return yield* requestOf(values)
  })

/** A failed job as the OperationOutcome a synchronous call answers with. */
export const failureOf = (cause: Cause.Cause<InstallFailure>): Effect.Effect<never, FhirError> => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) {
    return Effect.zipRight(
      Effect.logError("package install failed unexpectedly", cause),
      Effect.fail(fail("exception", "the install failed unexpectedly; see the server log. Nothing was installed"))
    )
  }
  const error = failure.value
  const nothing = "Nothing was installed."
  switch (error._tag) {
    case "PackageSpecInvalid":
      return Effect.fail(fail("invalid", `${error.message}. ${nothing}`))
    case "PackageNotFound":
      return Effect.fail(fail("not-found", `${error.message}. ${nothing}`))
    case "PackageReferenceRefused":
      return Effect.fail(fail("forbidden", `${error.message}. ${nothing}`))
    case "InstallConflict":
      return Effect.fail(fail("conflict", `${error.message}. ${nothing}`))
    case "LeaseLost":
      return Effect.fail(fail("transient", `this server can no longer write (it lost the writer lease). ${nothing} Try again`))
    case "SqlError":
      return Effect.zipRight(
        Effect.logError("package install: database error", error),
        Effect.fail(fail("exception", `the database failed during the install; see the server log. ${nothing}`))
      )
    default:
      return Effect.fail(fail("processing", `the package cannot be installed: ${error.message}. ${nothing}`))
  }
}

const count = (value: number) => ({ valueInteger: value })

/** The answer of a finished install: a Parameters with an outcome, each package, and the totals. */
export const reportParameters = (report: InstallReport, base: string) => {
  const installed = report.packages.filter((pkg) => pkg.status === "installed")
  const total = installed.reduce((sum, pkg) => sum + pkg.resources, 0)
  const asked = report.packages.find((pkg) => !pkg.dependency) ?? report.packages[report.packages.length - 1]!
  const healthz = new URL("/healthz?verbose=1", base).href
  const summary = installed.length === 0
    ? `${asked.name}@${asked.version} is already installed: nothing changed`
    : `installed ${installed.map((pkg) => `${pkg.name}@${pkg.version}`).join(", ")}: ${total} resources. The catalog holds them at generation ${report.generation}` +
      `${report.catalogPending ? " (not yet: it is still being rebuilt)" : ""}; the search index takes them in the background (search_index at ${healthz})`
  const issues = [
    { severity: "information", code: "informational", diagnostics: summary },
    ...report.warnings.map((warning) => ({ severity: "warning", code: "informational", diagnostics: warning }))
  ]
  return {
    resourceType: "Parameters",
    parameter: [
      { name: "outcome", resource: { resourceType: "OperationOutcome", issue: issues } },
      ...report.packages.map((pkg) => ({
        name: "package",
        part: [
          { name: "name", valueString: pkg.name },
          { name: "version", valueString: pkg.version },
          { name: "status", valueCode: pkg.status },
          { name: "dependency", valueBoolean: pkg.dependency },
          { name: "source", valueString: pkg.source },
          { name: "checksum", valueString: pkg.checksum },
          { name: "resources", ...count(pkg.resources) },
          ...Object.entries(pkg.types).sort(([a], [b]) => a.localeCompare(b)).map(([type, n]) => ({
            name: "type",
            part: [{ name: "resourceType", valueCode: type }, { name: "count", ...count(n) }]
          }))
        ]
      })),
      { name: "resources", ...count(total) },
      { name: "generation", ...count(report.generation) }
    ]
  }
}

/** The installed packages, as `GET [base]/$install` answers. */
const installedParameters = (packages: ReadonlyArray<InstalledPackage>) => ({
  resourceType: "Parameters",
  parameter: packages.map((pkg) => ({
    name: "package",
    part: [
      { name: "name", valueString: pkg.name },
      { name: "version", valueString: pkg.version },
      { name: "source", valueString: pkg.source },
      { name: "checksum", valueString: pkg.checksum },
      { name: "resources", ...count(pkg.resources) },
      ...(pkg.substitutedFrom === null ? [] : [{ name: "substitutedFrom", valueString: pkg.substitutedFrom }])
    ]
  }))
})

const finished = (request: FhirRequest, exit: Exit.Exit<InstallReport, InstallFailure>) =>
  Exit.isSuccess(exit)
    ? Effect.succeed(resourceBody(reportParameters(exit.value, request.base), request.negotiated, request.catalog))
    : failureOf(exit.cause)

const statusLocation = (request: FhirRequest, id: string) => `${request.base}/$install?_job=${encodeURIComponent(id)}`

const information = (diagnostics: string) => ({
  resourceType: "OperationOutcome",
  issue: [{ severity: "information", code: "informational", diagnostics }]
})

/** `GET [base]/$install`: a job's status (`_job`), or the installed packages. */
const get = (request: FhirRequest, accepted: ReadonlyArray<InputParameter>) =>
  Effect.gen(function*() {
    const installs = yield* PackageInstalls
    const { values } = yield* readArguments(request, "$install", accepted)
    const id = values.get("_job")
    const others = [...new Set(values.keys())].filter((name) => name !== "_job")
    if (others.length > 0) return yield* fail("not-supported", `$install installs with POST; GET takes only '_job' (it was given ${others.join(", ")})`, 405)
    if (id === null) return resourceBody(installedParameters(yield* installs.installed), request.negotiated, request.catalog)
    const job = yield* installs.status(id, waitOf(request))
    if (job === undefined) return yield* fail("not-found", `no install job ${id} is known here (jobs are kept in memory, the last ${keptJobs}, until the server stops)`)
    if (job.exit !== undefined) return yield* finished(request, job.exit)
    return resourceBody(information(`install job ${id}: ${job.progress}`), request.negotiated, request.catalog, {
      status: 202,
      headers: { "x-progress": job.progress, "retry-after": "1" }
    })
  })

/** `POST [base]/$install`: the install, answered when it ends, or at once with `Prefer: respond-async`. */
const post = (request: FhirRequest, accepted: ReadonlyArray<InputParameter>) =>
  Effect.gen(function*() {
    const installs = yield* PackageInstalls
    const asked = yield* readRequest(request, accepted)
    const id = yield* installs.start(asked)
    if (respondAsync(request)) {
      const location = statusLocation(request, id)
      return resourceBody(information(`install job ${id} accepted: its status is at ${location}`), request.negotiated, request.catalog, {
        status: 202,
        headers: { "content-location": location, "preference-applied": "respond-async" }
      })
    }
    const exit = yield* installs.result(id)
    if (exit === undefined) return yield* fail("exception", `install job ${id} was lost`)
    return yield* finished(request, exit)
  })

export const install = (request: FhirRequest): Effect.Effect<HttpServerResponse.HttpServerResponse, FhirError, PackageInstalls> =>
  Effect.suspend(() => {
    const accepted = withExtras(definedInputs(request.catalog, installDefinition), installInputs)
    return request.http.method === "POST" ? post(request, accepted) : get(request, accepted)
  }).pipe(Effect.catchTag("SqlError", (error) =>
    Effect.zipRight(Effect.logError("$install: database error", error), Effect.fail(fail("exception", "the database failed to answer; see the server log")))))

export const installModule = {
  name: "install",
  levels: ["system"],
  types: undefined,
  definition: () => installDefinition,
  methods: ["GET", "POST"],
  run: (call) => install(call.request)
} satisfies OperationModule<ReturnType<typeof install>>
