/** Follows the change feed in a test: `take(n)` waits for the next `n` events, in order. */
import { Chunk, Effect, Option, Stream } from "effect"
import { ChangeFeed, type FeedEvent, type FollowOptions } from "../../src/db/ChangeFeed.ts"

export const following = (options?: FollowOptions) =>
  Effect.gen(function*() {
    const feed = yield* ChangeFeed
    const pull = yield* Stream.toPull(yield* feed.follow(options))
    const buffered: Array<FeedEvent> = []
    const take = (n: number): Effect.Effect<Array<FeedEvent>> =>
      Effect.gen(function*() {
        while (buffered.length < n) {
          const chunk = yield* pull.pipe(Effect.catchAll((end) => Option.isNone(end) ? Effect.die("the feed ended") : Effect.die(end.value)))
          buffered.push(...Chunk.toArray(chunk))
        }
        return buffered.splice(0, n)
      })
    return { take, feed }
  })

/** The ids a list of events changed, commit by commit. */
export const idsOf = (events: ReadonlyArray<FeedEvent>): Array<string> =>
  events.flatMap((event) => event._tag === "Committed" ? event.changes.map((change) => change.id) : [])
