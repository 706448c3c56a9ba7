// Starts a test server (R4 catalog) on the given backend and keeps it until killed; prints its base.
import { Effect } from "effect"
import { startServer } from "../test/support/server.ts"
import { realPackageCache, registryUrl } from "../test/support/npmRegistry.ts"
const kind = (process.argv[2] ?? "sqlite") as "sqlite"
Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const s = yield* startServer(kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true } })
  console.log("BASE", s.base)
  yield* Effect.never
})))
