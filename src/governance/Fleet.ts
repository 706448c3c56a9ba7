/**
 * How many servers share the rate limits (spec: Limits, "Rate limits", `servers`). Configured, it is that
 * number. Unset, each server writes a heartbeat row (its own random id, the time it was last seen) every
 * ten seconds through the Writer and counts the rows seen in the last thirty: servers joining or leaving
 * change every server's share within a heartbeat or three. A server deletes its row when it stops; a row
 * that stops beating (a killed server) stops counting after thirty seconds and is deleted after an hour.
 * The times are each server's own clock: the fleet's clocks are taken to agree within a few seconds.
 */
import { Clock, Duration, Effect, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"

export const heartbeatEvery = Duration.seconds(10)
/** A server seen within this long counts. */
export const liveWithinMs = 30_000
/** A row not seen for this long is a server gone without saying: deleted. */
const forgetAfterMs = 3_600_000

export interface FleetMember {
  /** This server's id in the heartbeat table (undefined when `servers` is configured). */
  readonly serverId: string | undefined
  /** Servers sharing the limits now, at least 1: read synchronously per request. */
  readonly size: () => number
  /** Heartbeats done (written or failed) since start. */
  readonly beats: () => number
}

/**
 * One heartbeat of `serverId`: writes its row and returns how many servers were seen lately (itself
 * included), in one transaction.
 */
const beat = (serverId: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const now = yield* Clock.currentTimeMillis
    const sql = db.writer
    const { value } = yield* writer.commit(() =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO svc_servers (server_id, seen_at) VALUES (${serverId}, ${now})
          ON CONFLICT (server_id) DO UPDATE SET seen_at = excluded.seen_at`
        yield* sql`DELETE FROM svc_servers WHERE seen_at < ${now - forgetAfterMs}`
        const rows = yield* sql<{ live: number | string | bigint }>`
          SELECT COUNT(*) AS live FROM svc_servers WHERE seen_at >= ${now - liveWithinMs}`
        return Math.max(1, Number(rows[0]?.live ?? 1))
      })
    )
    return value
  })

/**
 * This server's place in the fleet. With `servers` set, that many; otherwise it beats now (so the count is
 * right from the first request), then every ten seconds in the scope, and deletes its row when the scope
 * closes. A failed heartbeat keeps the last count and is logged; the next one tries again.
 */
export const make = (servers: number | undefined, serverId: string = randomUUID()) =>
  Effect.gen(function*() {
    if (servers !== undefined) {
      const member: FleetMember = { serverId: undefined, size: () => servers, beats: () => 0 }
      return member
    }
    const db = yield* Database
    const writer = yield* Writer
    let size = 1
    let beats = 0
    const heartbeat = beat(serverId).pipe(
      Effect.tap((count) => Effect.sync(() => void (size = count))),
      Effect.catchAllCause((cause) => Effect.logWarning("rate limit heartbeat failed; the last fleet size stands", { size, cause })),
      Effect.provideService(Database, db),
      Effect.provideService(Writer, writer),
      Effect.ensuring(Effect.sync(() => void beats++))
    )
    yield* heartbeat
    yield* Effect.addFinalizer(() =>
      writer.commit(() => db.writer`DELETE FROM svc_servers WHERE server_id = ${serverId}`).pipe(Effect.ignoreLogged)
    )
    yield* Effect.forkScoped(Effect.repeat(heartbeat, Schedule.spaced(heartbeatEvery)).pipe(Effect.delay(heartbeatEvery)))
    const member: FleetMember = { serverId, size: () => size, beats: () => beats }
    return member
  })

export const Fleet = { make }
