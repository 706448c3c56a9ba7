/** A migrated database of one storage kind with the Writer on it, for tests of what writes. */
import { Effect, Layer, type Scope } from "effect"
import { type Database, layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import type { ChangeFeed } from "../../src/db/ChangeFeed.ts"
import { layer as writerLayer, type Writer } from "../../src/db/Writer.ts"
import { type BackendKind, freshDatabase } from "./backends.ts"

export const withStore = <A, E>(
  kind: BackendKind,
  body: Effect.Effect<A, E, Writer | ChangeFeed | Database | Scope.Scope>
): Effect.Effect<A, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const options = yield* freshDatabase(kind)
    const database = yield* Layer.build(databaseLayer(options))
    yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
    const writer = yield* Layer.build(writerLayer.pipe(Layer.provide(Layer.succeedContext(database))))
    return yield* body.pipe(Effect.provide(database), Effect.provide(writer))
  })
