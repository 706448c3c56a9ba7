/**
 * Metering (spec: capability 10; Limits, "Metering, request log, audit"; Endpoints, `GET /_usage`): what
 * each caller asked, per UTC day and class of request (the rate-limit cost classes of src/http/Route.ts),
 * with the bytes in and out, kept in `svc_usage` for the whole fleet.
 *
 * The counting is a completion listener on the front door, so the fast SQLite handlers and the Effect edge
 * are counted alike; it only adds to counters in a Map of this process, one entry per caller, day and class.
 * Every `flushEvery` a fiber moves the counters to the database in one transaction of the Writer, with an
 * upsert that adds them to the stored row: servers sharing a database add to the same rows. A flush that
 * fails puts its counts back, to go with the next one; the scope's end flushes a last time.
 *
 * The stored `client` is the caller key (src/http/Principal.ts): `client:<id>` or `client:<id>/user:<user>`
 * for a caller with a token, `address:<address>` for one without, so a client's users can be told apart and
 * summed (`/_usage?client=<id>` matches the client and all its users).
 */
import { dayOfInstant, utcDay } from "./days.ts"
import type { SqlError } from "@effect/sql/SqlError"
import { type Clock, Duration, Effect, Schedule, type Scope } from "effect"
import { HttpServerResponse } from "@effect/platform"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { Completion, CompletionListener } from "../http/FrontDoor.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import { callerKey } from "../http/Principal.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import type { CostClass } from "../http/Route.ts"
import { governanceRefusal } from "./access.ts"
import type { GovernanceRules } from "./Governance.ts"

/** The classes, in the order `/_usage` names them. */
export const usageClasses: ReadonlyArray<CostClass> = ["read", "search", "write", "bundle", "operation", "export", "sync"]

/** Counts of one caller, day and class, changed in place by the listener. */
interface Counter {
  readonly day: string
  readonly client: string
  readonly cls: CostClass
  requests: number
  refused: number
  bytesIn: number
  bytesOut: number
}

/** One stored row, as `/_usage` answers it. */
export interface UsageRow {
  readonly day: string
  readonly client: string
  readonly class: CostClass
  readonly requests: number
  readonly refused: number
  readonly bytes_in: number
  readonly bytes_out: number
}

/** A client's totals for quotas: requests, writes (class write and bundle), bytes in and out together. */
export interface Totals {
  readonly requests: number
  readonly writes: number
  readonly bytes: number
}

export interface ClientTotals {
  /** The current UTC day. */
  readonly day: Totals
  /** The current UTC month, the day included. */
  readonly month: Totals
}

/** What `/_usage` selects: every field optional. */
export interface UsageQuery {
  /** A client id (all its users), or a caller key as stored (`client:app/user:u1`, `address:10.0.0.1`). */
  readonly client?: string | undefined
  /** First and last UTC day, inclusive (`YYYY-MM-DD`). */
  readonly from?: string | undefined
  readonly to?: string | undefined
  readonly classes?: ReadonlyArray<CostClass> | undefined
  readonly limit: number
  readonly offset: number
}

export interface MeteringOptions {
  /** `metering.enabled`: off, nothing is counted and `/_usage` answers 404. */
  readonly enabled: boolean
  /** `--smart`: the endpoint needs a scope (access.ts). */
  readonly smart: boolean
  /** How often counts go to the database; 5 s by default. */
  readonly flushEvery?: Duration.DurationInput
  /** The most caller/day/class entries held between flushes; past it, counts of new callers go to `other`. */
  readonly maxEntries?: number
}

export interface Metering {
  readonly rules: GovernanceRules
  /** The listener alone (`rules.listeners`), for tests. */
  readonly listener: CompletionListener
  /** Moves the counts held in memory to the database now; on failure they are kept for the next flush. */
  readonly flush: Effect.Effect<void, SqlError | LeaseLost>
  /** The day's and month's totals of `client` (as `/_usage?client=` reads it), stored and not yet flushed. */
  readonly totals: (client: string) => Effect.Effect<ClientTotals, SqlError>
  /**
   * The totals of many clients at once (keys as `totals` takes them, answered under the same keys), read in
   * batches. `onRead` gets them, with the UTC day they are of, in the same synchronous step as the counts
   * not yet flushed are added (quotas start counting afresh there).
   */
  readonly totalsMany: (
    clients: ReadonlyArray<string>,
    onRead?: (day: string, totals: ReadonlyMap<string, ClientTotals>) => void
  ) => Effect.Effect<ReadonlyMap<string, ClientTotals>, SqlError>
  /** The stored rows `query` selects, after a flush (so that they hold this server's latest counts). */
  readonly usage: (query: UsageQuery) => Effect.Effect<ReadonlyArray<UsageRow>, SqlError>
  /** Entries held in memory now (for tests and the bound). */
  readonly held: () => number
}

/** Caller/day/class entries held between two flushes before new callers are folded into `other`. */
export const defaultMaxEntries = 50_000

/** The caller counts past the bound go to: stored like any caller, so nothing is lost, only unattributed. */
export const otherClient = "other"

export const defaultFlushEvery = Duration.seconds(5)

/** Rows `/_usage` answers at once by default, and at most (`limit`). */
export const defaultLimit = 1000
export const maxLimit = 10_000


/**
 * The stored client keys `client` selects: itself, and when it names a client (`app` or `client:app`), its
 * users too (`client:app/user:...`). A bare name is a client id.
 */
export const clientMatch = (client: string): { readonly exact: string; readonly usersOf: string | undefined } => {
  if (client.startsWith("address:") || client === otherClient) return { exact: client, usersOf: undefined }
  const key = client.startsWith("client:") ? client : `client:${client}`
  return { exact: key, usersOf: key.includes("/user:") ? undefined : `${key}/user:` }
}

const zero = (): { requests: number; writes: number; bytes: number } => ({ requests: 0, writes: 0, bytes: 0 })

const zeros = () => ({ day: zero(), month: zero() })

const push = <K, V>(map: Map<K, Array<V>>, key: K, value: V) => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [value])
  else list.push(value)
}

const isWrite = (cls: string): boolean => cls === "write" || cls === "bundle"

export const make = (options: MeteringOptions): Effect.Effect<Metering, never, Database | Writer | Scope.Scope> =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const clock: Clock.Clock = yield* Effect.clock
    const maxEntries = options.maxEntries ?? defaultMaxEntries
    // Flushes, totals and `/_usage` take turns, so that counts are never in flight while totals are read.
    const turn = yield* Effect.makeSemaphore(1)

    let counts = new Map<string, Counter>()
    // The current UTC day, formatted again only when the clock leaves it.
    const dayAt = dayOfInstant()
    const today = (): string => dayAt(clock.unsafeCurrentTimeMillis())

    /** The counter of `client`, `day` and `cls` in `into`, made when missing (in `other` past the bound). */
    const counterOf = (into: Map<string, Counter>, client: string, day: string, cls: CostClass): Counter => {
      const key = `${cls}|${day}|${client}`
      let counter = into.get(key)
      if (counter !== undefined) return counter
      if (into.size >= maxEntries && client !== otherClient) return counterOf(into, otherClient, day, cls)
      counter = { day, client, cls, requests: 0, refused: 0, bytesIn: 0, bytesOut: 0 }
      into.set(key, counter)
      return counter
    }

    const listener: CompletionListener = (completion: Completion) => {
      const counter = counterOf(counts, callerKey(completion.principal), today(), completion.route.cost)
      if (completion.status === 429) {
        counter.refused++
        return
      }
      counter.requests++
      counter.bytesIn += completion.bytesIn ?? 0
      counter.bytesOut += completion.bytesOut ?? 0
    }

    /** Puts counts that could not be stored back with those counted since. */
    const mergeBack = (pending: Map<string, Counter>) => {
      for (const counter of pending.values()) {
        const into = counterOf(counts, counter.client, counter.day, counter.cls)
        into.requests += counter.requests
        into.refused += counter.refused
        into.bytesIn += counter.bytesIn
        into.bytesOut += counter.bytesOut
      }
    }

    const store = (pending: ReadonlyArray<Counter>) =>
      writer.commit(() =>
        Effect.gen(function*() {
          const sql = db.writer
          // A few hundred rows a statement: well under SQLite's and Postgres's limits on parameters.
          for (let i = 0; i < pending.length; i += 500) {
            const rows = pending.slice(i, i + 500).map((c) => ({
              day: c.day,
              client: c.client,
              class: c.cls,
              requests: c.requests,
              refused: c.refused,
              bytes_in: c.bytesIn,
              bytes_out: c.bytesOut
            }))
            yield* sql`INSERT INTO svc_usage ${sql.insert(rows)}
              ON CONFLICT (day, client, class) DO UPDATE SET
                requests = svc_usage.requests + excluded.requests,
                refused = svc_usage.refused + excluded.refused,
                bytes_in = svc_usage.bytes_in + excluded.bytes_in,
                bytes_out = svc_usage.bytes_out + excluded.bytes_out`
          }
        })
      )

    const flushNow = Effect.suspend(() => {
      if (counts.size === 0) return Effect.void
      const pending = counts
      counts = new Map()
      return store([...pending.values()]).pipe(
        Effect.asVoid,
        Effect.tapError(() => Effect.sync(() => mergeBack(pending)))
      )
    })
    // Whole or not at all: an interrupted flush must not lose the counts it took.
    const flush = turn.withPermits(1)(Effect.uninterruptible(flushNow))

    const totalsMany = (
      clients: ReadonlyArray<string>,
      onRead?: (day: string, totals: ReadonlyMap<string, ClientTotals>) => void
    ): Effect.Effect<ReadonlyMap<string, ClientTotals>, SqlError> =>
      turn.withPermits(1)(Effect.gen(function*() {
        const day = today()
        const monthStart = `${day.slice(0, 8)}01`
        // Each stored key adds to the clients that select it: exactly, or as one of a client's users.
        const exact = new Map<string, Array<ReturnType<typeof zeros>>>()
        const users = new Map<string, Array<ReturnType<typeof zeros>>>()
        const result = new Map<string, ReturnType<typeof zeros>>()
        for (const client of clients) {
          if (result.has(client)) continue
          const totals = zeros()
          result.set(client, totals)
          const match = clientMatch(client)
          push(exact, match.exact, totals)
          if (match.usersOf !== undefined) push(users, match.usersOf, totals)
        }
        const targets = (key: string) => {
          const at = key.indexOf("/user:")
          const ofUser = at === -1 ? undefined : users.get(key.slice(0, at + 6))
          const own = exact.get(key)
          return ofUser === undefined ? own ?? [] : own === undefined ? ofUser : [...own, ...ofUser]
        }
        const add = (rowDay: string, key: string, cls: string, requests: number, bytes: number) => {
          if (rowDay < monthStart || rowDay > day) return
          for (const totals of targets(key)) {
            for (const t of rowDay === day ? [totals.day, totals.month] : [totals.month]) {
              t.requests += requests
              t.bytes += bytes
              if (isWrite(cls)) t.writes += requests
            }
          }
        }
        const wanted = [...result.keys()]
        // A hundred clients a statement: a few hundred parameters, well under either database's limit.
        for (let i = 0; i < wanted.length; i += 100) {
          const rows = yield* db.withReader((sql) => {
            const selected = wanted.slice(i, i + 100).map((client) => {
              const { exact, usersOf } = clientMatch(client)
              return usersOf === undefined
                ? sql`client = ${exact}`
                : sql`(client = ${exact} OR substr(client, 1, ${usersOf.length}) = ${usersOf})`
            })
            return sql<{ day: string; client: string; class: string; requests: number | string; bytes: number | string }>`
              SELECT day, client, class, sum(requests) AS requests, sum(bytes_in + bytes_out) AS bytes FROM svc_usage
              WHERE day >= ${monthStart} AND day <= ${day} AND ${sql.or(selected)}
              GROUP BY day, client, class`
          })
          for (const row of rows) add(row.day, row.client, row.class, Number(row.requests), Number(row.bytes))
        }
        // The counts held here and `onRead` in one synchronous step: no request is counted between them, so
        // a caller that counts on its own from `onRead` on neither misses nor repeats one.
        return yield* Effect.sync(() => {
          for (const c of counts.values()) add(c.day, c.client, c.cls, c.requests, c.bytesIn + c.bytesOut)
          onRead?.(day, result)
          return result
        })
      }))

    const totals = (client: string): Effect.Effect<ClientTotals, SqlError> =>
      Effect.map(totalsMany([client]), (all) => all.get(client)!)

    const usage = (query: UsageQuery): Effect.Effect<ReadonlyArray<UsageRow>, SqlError> =>
      turn.withPermits(1)(Effect.gen(function*() {
        // This server's latest counts first; if they cannot be stored, the stored rows are still answered.
        yield* Effect.ignore(Effect.uninterruptible(flushNow))
        const match = query.client === undefined ? undefined : clientMatch(query.client)
        const rows = yield* db.withReader((sql) => {
          const conditions = [
            ...(query.from === undefined ? [] : [sql`day >= ${query.from}`]),
            ...(query.to === undefined ? [] : [sql`day <= ${query.to}`]),
            ...(query.classes === undefined || query.classes.length === 0 ? [] : [sql.in("class", query.classes)]),
            ...(match === undefined ? [] : [
              match.usersOf === undefined
                ? sql`client = ${match.exact}`
                : sql`(client = ${match.exact} OR substr(client, 1, ${match.usersOf.length}) = ${match.usersOf})`
            ])
          ]
          return sql<{ day: string; client: string; class: CostClass; requests: number | string; refused: number | string; bytes_in: number | string; bytes_out: number | string }>`
            SELECT day, client, class, requests, refused, bytes_in, bytes_out FROM svc_usage
            ${conditions.length === 0 ? sql`` : sql`WHERE ${sql.and(conditions)}`}
            ORDER BY day DESC, client, class
            LIMIT ${query.limit} OFFSET ${query.offset}`
        })
        return rows.map((row) => ({
          day: row.day,
          client: row.client,
          class: row.class,
          requests: Number(row.requests),
          refused: Number(row.refused),
          bytes_in: Number(row.bytes_in),
          bytes_out: Number(row.bytes_out)
        }))
      }))

    const handler: RootHandler = (request) =>
      Effect.gen(function*() {
        const refusal = governanceRefusal(request.principal, options.smart)
        if (refusal !== undefined) return refusal
        if (!options.enabled) {
          return outcomeResponse("not-found", "metering is off (metering.enabled = false): there is no usage to show")
        }
        const parsed = parseUsageQuery(request.http.url)
        if (typeof parsed === "string") return outcomeResponse("invalid", parsed)
        // One row more than asked tells whether there is a next page.
        const rows = yield* usage({ ...parsed, limit: parsed.limit + 1 })
        const page = rows.slice(0, parsed.limit)
        const body: { usage: ReadonlyArray<UsageRow>; next?: string } = { usage: page }
        if (rows.length > parsed.limit) body.next = nextPage(request.http.url, parsed.offset + parsed.limit)
        return HttpServerResponse.text(JSON.stringify(body), { contentType: "application/json" })
      }).pipe(
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning("usage could not be read", { error: error.message }),
            outcomeResponse("transient", "usage could not be read from the database; try again")
          )
        )
      )

    if (options.enabled) {
      // Added before the fiber starts, so it runs after the fiber is stopped: the last counts are stored.
      yield* Effect.addFinalizer(() =>
        flush.pipe(Effect.catchAll((error) => Effect.logWarning("usage counts could not be stored at shutdown", { error: error.message })))
      )
      yield* flush.pipe(
        Effect.catchAll((error) => Effect.logWarning("usage counts could not be stored; kept for the next flush", { error: error.message })),
        Effect.repeat(Schedule.spaced(options.flushEvery ?? defaultFlushEvery)),
        Effect.delay(options.flushEvery ?? defaultFlushEvery),
        Effect.forkScoped
      )
    }

    return {
      rules: { policies: [], listeners: options.enabled ? [listener] : [], routes: { "/_usage": handler } },
      listener,
      flush,
      totals,
      totalsMany,
      usage,
      held: () => counts.size
    }
  })

const dayPattern = /^\d{4}-\d{2}-\d{2}$/

const isDay = (text: string): boolean => {
  if (!dayPattern.test(text)) return false
  const millis = Date.parse(`${text}T00:00:00Z`)
  // A day that does not exist (the 30th of February) parses as another, or not at all.
  return !Number.isNaN(millis) && utcDay(millis) === text
}

const usageParameters = new Set(["client", "from", "to", "class", "limit", "offset"])

const count = (name: string, text: string, max: number): number | string => {
  if (!/^\d{1,9}$/.test(text)) return `${name} must be a whole number, not "${text}"`
  const value = Number(text)
  return value > max ? `${name} may be at most ${max}` : value
}

/** The query of a `/_usage` URL, or what is wrong with it (naming the parameter). */
export const parseUsageQuery = (url: string): UsageQuery | string => {
  const at = url.indexOf("?")
  const params = new URLSearchParams(at === -1 ? "" : url.slice(at + 1))
  for (const name of params.keys()) {
    if (!usageParameters.has(name)) return `unknown parameter ${name} (known: ${[...usageParameters].join(", ")})`
  }
  for (const name of ["client", "from", "to", "limit", "offset"]) {
    if (params.getAll(name).length > 1) return `${name} may be given once`
  }
  const client = params.get("client") ?? undefined
  if (client === "") return "client must not be empty"
  const from = params.get("from") ?? undefined
  const to = params.get("to") ?? undefined
  if (from !== undefined && !isDay(from)) return `from must be a UTC day YYYY-MM-DD, not "${from}"`
  if (to !== undefined && !isDay(to)) return `to must be a UTC day YYYY-MM-DD, not "${to}"`
  if (from !== undefined && to !== undefined && from > to) return `from (${from}) is after to (${to})`
  const classes: Array<CostClass> = []
  for (const value of params.getAll("class").flatMap((v) => v.split(","))) {
    const cls = usageClasses.find((c) => c === value)
    if (cls === undefined) return `class must be one of ${usageClasses.join(", ")}, not "${value}"`
    if (!classes.includes(cls)) classes.push(cls)
  }
  const limit = params.has("limit") ? count("limit", params.get("limit")!, maxLimit) : defaultLimit
  if (typeof limit === "string") return limit
  if (limit === 0) return "limit must be at least 1"
  const offset = params.has("offset") ? count("offset", params.get("offset")!, 1_000_000_000) : 0
  if (typeof offset === "string") return offset
  return { client, from, to, classes: classes.length === 0 ? undefined : classes, limit, offset }
}

/** The same query from `offset` on. */
const nextPage = (url: string, offset: number): string => {
  const at = url.indexOf("?")
  const params = new URLSearchParams(at === -1 ? "" : url.slice(at + 1))
  params.set("offset", String(offset))
  return `/_usage?${params.toString()}`
}
