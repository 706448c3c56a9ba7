/**
 * Readiness of the process (spec: "Readiness of a process"): `starting` with the step it is in,
 * then `serving`; while serving, `/readyz` runs a one-row database probe whose result is reused for
 * one second and shared by overlapping probes, and which counts as failed after two seconds.
 */
import { Clock, Context, Deferred, Duration, Effect, Layer, Ref, SynchronizedRef } from "effect"

export type ReadyStatus = "ok" | "starting" | "unavailable"

/** A process's role on its database (spec: Process roles). */
export type Role = "primary" | "standby" | "replica"

export interface ReadyResult {
  readonly status: ReadyStatus
  readonly reason?: string
}

/** The fixed phrases of `reason`: the cause itself goes to the debug log. */
export const Reasons = {
  starting: "process is starting",
  openingDatabase: "opening the database",
  migrating: "applying database migrations",
  installingPackages: "installing packages",
  buildingCatalog: "building the conformance catalog",
  indexing: "indexing resources for search",
  pullingTerminology: "pulling terminology sources",
  databaseFailed: "database query failed",
  databaseTimeout: "database query took more than 2 seconds",
  stopping: "process is stopping",
  waitingForLease: "standby: waiting for the writer lease",
  waitingForPrimary: "replica: waiting for the primary to migrate the database and install its packages",
  notFollowing: "replica: not following the primary's changes",
  noWatermark: "the primary cannot record its published watermark",
  auditBacklog: "audit events cannot be written to the database"
} as const

export type Phase =
  | { readonly _tag: "starting"; readonly reason: string; readonly details?: Effect.Effect<Record<string, unknown>> }
  | { readonly _tag: "serving"; readonly probe: Effect.Effect<ReadyResult>; readonly details: Effect.Effect<Record<string, unknown>> }
  | { readonly _tag: "stopping" }

export interface ProbeOptions {
  readonly reuseFor: Duration.DurationInput
  readonly timeout: Duration.DurationInput
}

export const defaultProbeOptions: ProbeOptions = { reuseFor: "1 second", timeout: "2 seconds" }

interface Cached {
  readonly result: Deferred.Deferred<ReadyResult>
  readonly completedAt: number | undefined
}

/**
 * Wraps a one-row query as the readiness probe. The query runs in a fiber of its own, so a probe whose
 * client goes away does not cancel the answer others are waiting for.
 */
export const cachedProbe = (
  query: Effect.Effect<unknown, unknown>,
  options: ProbeOptions = defaultProbeOptions
): Effect.Effect<Effect.Effect<ReadyResult>> =>
  Effect.gen(function*() {
    const reuseMillis = Duration.toMillis(options.reuseFor)
    const state = yield* SynchronizedRef.make<Cached | undefined>(undefined)

    const run = (deferred: Deferred.Deferred<ReadyResult>) =>
      query.pipe(
        Effect.as<ReadyResult>({ status: "ok" }),
        Effect.catchAllCause((cause) =>
          Effect.logDebug("readiness probe failed", cause).pipe(
            Effect.as<ReadyResult>({ status: "unavailable", reason: Reasons.databaseFailed })
          )
        ),
        Effect.timeoutTo({
          duration: options.timeout,
          onSuccess: (result): ReadyResult => result,
          onTimeout: (): ReadyResult => ({ status: "unavailable", reason: Reasons.databaseTimeout })
        }),
        Effect.flatMap((result) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            SynchronizedRef.update(state, (current) =>
              current?.result === deferred ? { result: deferred, completedAt: now } : current
            ).pipe(Effect.zipRight(Deferred.succeed(deferred, result))))
        )
      )

    return SynchronizedRef.modifyEffect(state, (current) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (current && (current.completedAt === undefined || now - current.completedAt < reuseMillis)) {
          return [current.result, current] as const
        }
        const deferred = yield* Deferred.make<ReadyResult>()
        yield* Effect.forkDaemon(run(deferred))
        return [deferred, { result: deferred, completedAt: undefined }] as const
      })).pipe(Effect.flatMap(Deferred.await))
  })

export class Readiness extends Context.Tag("svc/http/Readiness")<Readiness, {
  readonly phase: Effect.Effect<Phase>
  /** `details`, when given, show how far the step has got in `/healthz?verbose=1`. */
  readonly starting: (reason: string, details?: Effect.Effect<Record<string, unknown>>) => Effect.Effect<void>
  /** `probe` answers `/readyz`; `details` are the counters of `/healthz?verbose=1`. */
  readonly serving: (
    probe: Effect.Effect<ReadyResult>,
    details: Effect.Effect<Record<string, unknown>>
  ) => Effect.Effect<void>
  readonly stopping: Effect.Effect<void>
  /**
   * Adds a condition of serving, asked (synchronously, so it must be cheap) at every `/readyz` while serving:
   * a reason makes the answer `unavailable` with it (the audit trail that cannot drain its buffer).
   */
  readonly require: (condition: () => string | undefined) => Effect.Effect<void>
  /** The answer of `/readyz`. */
  readonly check: Effect.Effect<ReadyResult>
  /** The role now, once start-up has said it (a standby that took the writer lease is the primary from then on). */
  readonly role: Effect.Effect<Role | undefined>
  readonly setRole: (role: Role) => Effect.Effect<void>
}>() {}

export const make = Effect.gen(function*() {
  const phase = yield* Ref.make<Phase>({ _tag: "starting", reason: Reasons.starting })
  const conditions: Array<() => string | undefined> = []
  const role = yield* Ref.make<Role | undefined>(undefined)
  return Readiness.of({
    role: Ref.get(role),
    setRole: (next) => Ref.set(role, next),
    phase: Ref.get(phase),
    starting: (reason, details) => Ref.set(phase, details === undefined ? { _tag: "starting", reason } : { _tag: "starting", reason, details }),
    serving: (probe, details) => Ref.set(phase, { _tag: "serving", probe, details }),
    stopping: Ref.set(phase, { _tag: "stopping" }),
    require: (condition) => Effect.sync(() => void conditions.push(condition)),
    check: Effect.flatMap(Ref.get(phase), (current): Effect.Effect<ReadyResult> => {
      switch (current._tag) {
        case "starting":
          return Effect.succeed({ status: "starting", reason: current.reason })
        case "stopping":
          return Effect.succeed({ status: "unavailable", reason: Reasons.stopping })
        case "serving": {
          for (const condition of conditions) {
            const reason = condition()
            if (reason !== undefined) return Effect.succeed({ status: "unavailable", reason })
          }
          return current.probe
        }
      }
    })
  })
})

export const layer = Layer.effect(Readiness, make)
