/**
 * A second process following a database's change feed by polling (src/db/ChangeFeed.ts `polling`), as a
 * process that does not write does. Given the database options as JSON (argv[2]), it writes `{"ready":ts}`
 * once it follows, then one JSON line per event: `{"commitTs":..,"actor":..,"ids":[..]}`.
 */
import { Effect, Layer, Stream } from "effect"
import { layer as databaseLayer, type DatabaseOptions } from "../../src/db/Database.ts"
import { ChangeFeed, polling } from "../../src/db/ChangeFeed.ts"

const options = JSON.parse(process.argv[2]!) as DatabaseOptions

const program = Effect.gen(function*() {
  const feed = yield* ChangeFeed
  const events = yield* feed.follow()
  process.stdout.write(`${JSON.stringify({ ready: yield* feed.published })}\n`)
  yield* Stream.runForEach(events, (event) =>
    Effect.sync(() => {
      const line = event._tag === "Committed"
        ? { commitTs: event.commitTs, actor: event.actor, ids: event.changes.map((change) => change.id) }
        : { fellBehind: event.afterTs }
      process.stdout.write(`${JSON.stringify(line)}\n`)
    }))
})

Effect.runFork(
  program.pipe(
    Effect.scoped,
    Effect.provide(polling({ interval: "20 millis" }).pipe(Layer.provide(databaseLayer(options))))
  )
)
