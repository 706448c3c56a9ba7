/**
 * `$graphql` (https://hl7.org/fhir/R4/resource-operation-graphql.html, https://hl7.org/fhir/R4/graphql.html;
 * docs/graphql.md): FHIR GraphQL under the FHIR base, served by the same engine as `/graphql` (src/graphql/run.ts).
 *
 * - `[base]/$graphql`: a query that starts from the query root (`Patient(id: ...)`, `PatientList(...)`,
 *   `PatientConnection(...)`), as `/graphql`.
 * - `[base]/{type}/{id}/$graphql`: a query on that resource, which is the query's root (`{ name { family } }`);
 *   the resource is read as a REST read would be (404 unknown, 410 deleted, refused without read access).
 *
 * GET with `query` (and `variables`, `operationName`) or POST with `application/json` or `application/graphql`,
 * as `/graphql`; at `[base]/$graphql` a mutation by POST, as at `/graphql`. The answer is GraphQL's
 * `application/json` (not a FHIR resource). Access: the engine's own, each resource as the caller may read or
 * write it.
 */
import { Effect } from "effect"
import { fail } from "../http/FhirError.ts"
import { readRequest } from "../graphql/request.ts"
import { readResourceAs, runGraphQL } from "../graphql/run.ts"
import { Database } from "../db/Database.ts"
import type { OperationCall, OperationModule } from "./Operation.ts"

export const graphqlDefinition = "http://hl7.org/fhir/OperationDefinition/Resource-graphql"

const run = ({ request, type, id }: OperationCall) =>
  Effect.gen(function*() {
    const asked = yield* readRequest(request.http)
    if (typeof asked === "string") return yield* fail("invalid", `$graphql: ${asked}`)
    const caller = {
      access: request.access,
      catalog: request.catalog,
      base: request.base,
      maxBundleEntries: request.maxBundleEntries,
      method: request.http.method,
      label: "$graphql"
    }
    if (type === undefined || id === undefined) return yield* runGraphQL(asked, caller)
    const db = yield* Database
    const resource = yield* readResourceAs(db, request.catalog, request.access, type, id)
    return yield* runGraphQL(asked, caller, { type, resource })
  })

export const graphqlModule: OperationModule<ReturnType<typeof run>> = {
  name: "graphql",
  levels: ["system", "instance"],
  types: undefined,
  definition: () => graphqlDefinition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run
}
