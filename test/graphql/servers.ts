/**
 * The servers GraphQL's tests run against: the real R4 packages (the schema is theirs), on SQLite and Postgres,
 * and under `--smart` with a system token of every scope.
 */
import { Effect } from "effect"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl } from "../support/npmRegistry.ts"
import { startServer } from "../support/server.ts"
import { secrets, systemToken } from "../support/smartTokens.ts"

export const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

/** A server with the real packages; `conformance` adds settings (`update_as_create`...). */
export const packagesServer = (kind: BackendKind, conformance: Record<string, unknown> = {}) =>
  startServer(kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, ...conformance } })

/** A SQLite server with the real packages under `--smart`, and a system token that may do everything. */
export const smartPackagesServer = Effect.gen(function*() {
  const server = yield* startServer("sqlite", { smart: { enabled: true, demo_login: true }, conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } }).pipe(
    Effect.provideService(SmartSecrets, secrets)
  )
  return { server, system: yield* systemToken(server, "system/*.cruds") }
})
