/**
 * `/graphql` (docs/graphql.md): FHIR GraphQL (https://hl7.org/fhir/R4/graphql.html) at the server's root, by GET
 * and POST (request.ts), run by run.ts. The answer is `application/json`, `{ "data", "errors" }`: 200 once the
 * request is a GraphQL request (its errors, parse and validation errors included, in `errors`), 400 when it is
 * not one. Under `--smart` it needs a bearer token. Mutations (mutations.ts) write as the REST API does
 * (writes.ts), by POST only.
 */
import { Effect } from "effect"
import { accessOf } from "../auth/access/Access.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import type { Database } from "../db/Database.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import { readRequest } from "./request.ts"
import type { ResourceStore } from "../store/ResourceStore.ts"
import { runGraphQL } from "./run.ts"

const notGraphQL = (message: string) => outcomeResponse("invalid", `/graphql: ${message}`, { status: 400 })

/** `/graphql`, with or without `--smart`. */
export const graphqlRoutes = (options: {
  readonly smart: boolean
  /** `[base]`, the FHIR base of this server: references under it are resolved as relative ones. */
  readonly base: string
  /** `server.max_bundle_entries`, for a Bundle a mutation writes. */
  readonly maxBundleEntries: number
}): Readonly<Record<string, RootHandler<never, Database | CatalogService | ResourceStore>>> => ({
  "/graphql": (request) =>
    Effect.gen(function*() {
      if (options.smart && request.principal._tag !== "Authorized") {
        return outcomeResponse("login", "/graphql needs a bearer token", { status: 401, headers: { "www-authenticate": "Bearer" } })
      }
      const read = yield* Effect.either(readRequest(request.http))
      if (read._tag === "Left") return outcomeResponse(read.left.code, `/graphql: ${read.left.diagnostics}`, read.left.status === undefined ? {} : { status: read.left.status })
      const asked = read.right
      if (typeof asked === "string") return notGraphQL(asked)
      const catalog = yield* (yield* CatalogService).get
      const caller = { access: accessOf(request.principal), catalog, base: options.base, maxBundleEntries: options.maxBundleEntries, method: request.http.method, label: "/graphql" }
      return yield* runGraphQL(asked, caller)
    })
})
