/**
 * The terminology pull (interface spec, `terminology.urls` and `--terminology`; docs/terminology-pull.md): the
 * CodeSystems, ValueSets and ConceptMaps of each configured URL are read over HTTP and written into the
 * database as ordinary resources, at start and then every `terminology.refresh_minutes` (sooner after a
 * failure), so that the catalog's terminology index takes them in through the catalog reload, without a
 * restart. Only the process that writes the database pulls (the holder of the writer lease), one supervised
 * fiber per URL, on the Clock. An attempt that wrote has the catalog rebuilt at once and waits for it (at most
 * `catalogWait`); what it refused is then tried once more (a ValueSet listing codes of a CodeSystem it wrote).
 *
 * Start-up waits for the first pull of every URL, at most `startWait`: a URL whose first pull failed and from
 * which the database holds nothing stops the start (exit status 1, as unreachable packages do on a first
 * start); one the database holds resources of is logged and retried. After that no failure is fatal: each is
 * logged and shown by `/healthz?verbose=1`, and what was pulled before goes on being served.
 */
import { Cause, Clock, Deferred, Duration, Effect, Either, Option, Schema, type Scope } from "effect"
import { CatalogService } from "../../catalog/CatalogService.ts"
import { CatalogReload } from "../../search/CatalogReload.ts"
import { Database } from "../../db/Database.ts"
import { FhirError } from "../../http/FhirError.ts"
import { Readiness, Reasons } from "../../http/Readiness.ts"
import { readCondition } from "../../store/conditional.ts"
import { ResourceStore } from "../../store/ResourceStore.ts"
import { findMatches } from "../../search/plan/query.ts"
import { basicAuthorization, type Target, withoutCredentials } from "./http.ts"
import { defaultReadLimits, type Kind, type ReadLimits, readSource, terminologyTypes } from "./read.ts"
import { describeResource, emptyTally, retryRefused, type Tally, writePage, type WriteContext } from "./write.ts"

export interface PullOptions {
  /** `terminology.urls`. */
  readonly urls: ReadonlyArray<string>
  /** `terminology.refresh_minutes`: the time between two pulls of a URL that succeeded. */
  readonly refresh: Duration.Duration
  /** `[base]` of the server, for the write scope. */
  readonly base: string
  /** `server.max_bundle_entries`. */
  readonly maxBundleEntries: number
  /** The longest start-up waits for the first pulls; what is not done by then goes on in the background. */
  readonly startWait?: Duration.DurationInput
  readonly limits?: ReadLimits
}

/** The longest start-up waits for the first pulls, unless told otherwise. */
export const defaultStartWait = Duration.seconds(60)

/** The longest an attempt waits for the catalog to hold what it wrote. */
export const catalogWait = Duration.seconds(60)

/** After a failure a URL is tried again after 1 minute, then 2, 4, ... up to `refresh`. */
export const firstRetry = Duration.minutes(1)

/** A URL could not be pulled on a first start (nothing of it in the database): the process does not start. */
export class TerminologyUnavailable extends Schema.TaggedError<TerminologyUnavailable>()("TerminologyUnavailable", {
  message: Schema.String
}) {}

/** How one URL has fared, as `/healthz?verbose=1` shows it. */
interface SourceStatus {
  readonly url: string
  kind: Kind | null
  pulling: boolean
  attempts: number
  failures: number
  last_attempt_at: string | null
  last_success_at: string | null
  next_attempt_at: string | null
  last_error: string | null
  /** What the last attempt (finished) read, wrote and skipped. */
  last_pull: Tally | null
}

const instant = (millis: number): string => new Date(millis).toISOString()

/** What the first attempt of a URL came to. */
type First = { readonly ok: true } | { readonly ok: false; readonly reason: string }

/**
 * Starts pulling every URL of `options` in fibers of the current scope, waits for their first pulls (at most
 * `startWait`), and fails when one failed on a first start. Succeeds with the details `/healthz?verbose=1` shows.
 */
export const start = (
  options: PullOptions
): Effect.Effect<Effect.Effect<Record<string, unknown>>, TerminologyUnavailable, Scope.Scope | Database | ResourceStore | CatalogService | CatalogReload | Readiness> =>
  Effect.gen(function*() {
    const db = yield* Database
    const store = yield* ResourceStore
    const catalogs = yield* CatalogService
    const reload = yield* CatalogReload
    const readiness = yield* Readiness
    const limits = options.limits ?? defaultReadLimits

    // A URL named twice (with or without credentials) is one source.
    const urls = new Map<string, URL>()
    for (const text of options.urls) {
      const url = new URL(text)
      if (!urls.has(withoutCredentials(url))) urls.set(withoutCredentials(url), url)
    }
    const sources = [...urls.values()].map((url) => {
      const authorization = basicAuthorization(url)
      const target: Target = { url, credentials: authorization === undefined ? undefined : { origin: url.origin, authorization } }
      const status: SourceStatus = {
        url: withoutCredentials(url),
        kind: null,
        pulling: false,
        attempts: 0,
        failures: 0,
        last_attempt_at: null,
        last_success_at: null,
        next_attempt_at: null,
        last_error: null,
        last_pull: null
      }
      return { target, status }
    })
    const details = Effect.sync(() => ({
      refresh_minutes: Duration.toMinutes(options.refresh),
      sources: sources.map(({ status }) => ({ ...status, last_pull: status.last_pull === null ? null : structuredClone(status.last_pull) }))
    }))

    /** One pull of a source: never fails; what happened is in its status and the log. */
    const attempt = (target: Target, status: SourceStatus) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        status.pulling = true
        status.attempts++
        status.last_attempt_at = instant(started)
        const context: WriteContext = {
          store,
          withReader: db.withReader,
          scope: { base: options.base, catalog: yield* catalogs.get, maxBundleEntries: options.maxBundleEntries },
          source: status.url,
          seen: new Set(),
          tally: emptyTally(),
          refused: [],
          lastCommitTs: 0
        }
        // The catalog as it is now: a page may hold what an earlier page's resources need.
        const current = Effect.map(catalogs.get, (catalog) => {
          context.scope = { ...context.scope, catalog }
          return context
        })
        const pull = Effect.gen(function*() {
          const kind = yield* readSource(target, (page) =>
            Effect.gen(function*() {
              context.tally.skipped.other_type += page.otherTypes
              context.tally.skipped.unreadable += page.unreadable
              yield* writePage(yield* current, page.resources)
            }), limits)
          // The catalog takes in what was written before the pull counts as done; then a ValueSet refused for codes
          // of a CodeSystem this pull wrote is tried again, and what that writes taken in too.
          const caughtUp = (commitTs: number) =>
            commitTs === 0 ? Effect.succeed(true) : Effect.map(Effect.timeout(reload.reachedNow(commitTs), catalogWait).pipe(Effect.option), Option.isSome)
          if ((yield* caughtUp(context.lastCommitTs)) && context.refused.length > 0 && context.lastCommitTs > 0) {
            const before = context.lastCommitTs
            yield* retryRefused(yield* current)
            if (context.lastCommitTs > before) yield* caughtUp(context.lastCommitTs)
          }
          return kind
        })
        const outcome = yield* pull.pipe(
          Effect.map((kind) => Either.right(kind)),
          Effect.catchAllCause((cause) => Effect.succeed(Either.left(reasonOf(cause))))
        )
        for (const { reason, resource } of context.refused.slice(0, 20)) {
          yield* Effect.logWarning("terminology pull: resource refused", { source: status.url, resource: describeResource(resource), reason })
        }
        const finished = yield* Clock.currentTimeMillis
        status.pulling = false
        status.last_pull = context.tally
        const counts = { read: context.tally.read, created: context.tally.created, updated: context.tally.updated, unchanged: context.tally.unchanged, ...context.tally.skipped }
        if (Either.isRight(outcome)) {
          status.kind = outcome.right
          status.last_success_at = instant(finished)
          status.last_error = null
          yield* Effect.logInfo("terminology pulled", { source: status.url, kind: outcome.right, ...counts, ms: finished - started })
          return { ok: true } as const
        }
        status.failures++
        status.last_error = outcome.left
        yield* Effect.logWarning("terminology pull failed", { source: status.url, reason: outcome.left, ...counts, ms: finished - started })
        return { ok: false, reason: outcome.left } as const
      })

    /** Pulls a source for ever: at once, then after `refresh`, or sooner after failures. */
    const run = (target: Target, status: SourceStatus, first: Deferred.Deferred<First>) =>
      Effect.gen(function*() {
        let failuresInRow = 0
        for (;;) {
          const result = yield* attempt(target, status)
          yield* Deferred.succeed(first, result)
          failuresInRow = result.ok ? 0 : failuresInRow + 1
          const wait = result.ok
            ? options.refresh
            : Duration.min(options.refresh, Duration.times(firstRetry, 2 ** Math.min(failuresInRow - 1, 20)))
          status.next_attempt_at = instant((yield* Clock.currentTimeMillis) + Duration.toMillis(wait))
          yield* Effect.sleep(wait)
        }
      })

    yield* readiness.starting(Reasons.pullingTerminology, Effect.map(details, (terminology) => ({ terminology })))
    const firsts = yield* Effect.forEach(sources, ({ status, target }) =>
      Effect.gen(function*() {
        const first = yield* Deferred.make<First>()
        yield* Effect.forkScoped(run(target, status, first))
        return { status, first }
      }))
    const waited = yield* Effect.forEach(firsts, ({ first }) => Deferred.await(first)).pipe(
      Effect.timeoutTo({
        duration: options.startWait ?? defaultStartWait,
        onSuccess: (results) => results,
        onTimeout: () => undefined
      })
    )
    if (waited === undefined) {
      const going = firsts.filter(({ status }) => status.pulling).map(({ status }) => status.url)
      yield* Effect.logInfo("terminology pull goes on in the background", { sources: going })
    }
    const problems: Array<string> = []
    for (const { first, status } of firsts) {
      const result = yield* Deferred.poll(first)
      if (result._tag === "None") continue
      const done = yield* result.value
      if (done.ok) continue
      const holds = yield* holdsFrom(status.url)
      if (!holds) problems.push(`terminology source ${status.url} could not be pulled on a first start: ${done.reason}`)
    }
    if (problems.length > 0) return yield* new TerminologyUnavailable({ message: problems.join("\n") })
    return details
  })

/** Whether the database holds a current CodeSystem, ValueSet or ConceptMap pulled from `source` (by `_source`). */
const holdsFrom = (source: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const catalog = yield* (yield* CatalogService).get
    for (const type of terminologyTypes) {
      const condition = readCondition(catalog, type, new URLSearchParams({ _source: source.replace(/[\\,$|]/g, "\\$&") }), "terminology pull")
      if (condition instanceof FhirError) continue
      const found = yield* db.withReader((sql) => findMatches(sql, condition.search, 1)).pipe(Effect.orElseSucceed(() => []))
      if (found.length > 0) return true
    }
    return false
  })

/** A failure's reason in one line: the error's `reason` or message. */
const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause))
  if (failure !== undefined) {
    if (typeof failure === "object" && failure !== null && "reason" in failure && typeof failure.reason === "string") return failure.reason
    if (failure instanceof Error && failure.message !== "") return failure.message
    return String(failure)
  }
  return Cause.isInterruptedOnly(cause) ? "interrupted" : `unexpected failure: ${Cause.pretty(cause).split("\n")[0] ?? ""}`
}
