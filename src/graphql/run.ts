/**
 * Running a FHIR GraphQL request (https://hl7.org/fhir/R4/graphql.html; docs/graphql.md), wherever it is served
 * (`/graphql`, `[base]/$graphql`, `[base]/{type}/{id}/$graphql`): the query is parsed, validated and executed by
 * the `graphql` package against the catalog's schema (schema.ts); what it reads is read as the caller may
 * (docs/smart.md, "Scopes"): a resource the caller may not read is an error of its field, as one that does not
 * exist is; searches are REST's (the same parser, the same restriction, never lenient).
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Effect, Exit, Runtime } from "effect"
import { execute, type ExecutionResult, type GraphQLError, parse, specifiedRules, validate } from "graphql"
import type { Access } from "../auth/access/Access.ts"
import { searchRestriction } from "../auth/access/conditions.ts"
import { granted, searchGranted, seen } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { fail } from "../http/FhirError.ts"
import * as Search from "../search/Search.ts"
import { atPage } from "../search/paging.ts"
import { maxOffset } from "../search/parse/result.ts"
import { readCurrent } from "../store/reads.ts"
import { depthLimit, resourceBudget } from "./bounds.ts"
import { reshape } from "./directives.ts"
import { fhirLiterals } from "./literals.ts"
import { referenceLoader, serverReference } from "./references.ts"
import type { GraphQLRequest } from "./request.ts"
import { type GraphQLContext, instanceSchemaOf, schemaOf } from "./schema.ts"
import type { SearchPage } from "./searchFields.ts"

/** Reads `type/id` as `access` may: the resource, or a failure whose message the answer's `errors` gives. */
const readAs = (db: Database["Type"], catalog: Catalog, access: Access, type: string, id: string) =>
  readResourceAs(db, catalog, access, type, id).pipe(
    Effect.mapError((error) => new Error(error.message)),
    Effect.catchAllDefect((defect) => Effect.fail(new Error(`reading ${type}/${id} failed: ${String(defect)}`)))
  )

/** Reads `type/id` as `access` may: the resource, or the FHIR error a read of it would answer (404, 410, 403). */
export const readResourceAs = (db: Database["Type"], catalog: Catalog, access: Access, type: string, id: string) =>
  Effect.gen(function*() {
    const rule = yield* granted(access, catalog, type, "r")
    return yield* db.withReader((sql) =>
      Effect.gen(function*() {
        yield* seen(sql, catalog, type, id, rule)
        const current = yield* readCurrent(sql, type, id)
        if (current === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
        if (current.content === null) return yield* fail("deleted", `${type}/${id} was deleted`)
        return JSON.parse(current.content) as Record<string, unknown>
      })
    )
  })

/**
 * A page of a search of `type` as `access` may see it: the same parser, the same refusals (never
 * lenient) and the same restriction as a REST search; a refusal is a failure whose message the answer gives.
 */
const searchAs = (db: Database["Type"], catalog: Catalog, access: Access, type: string, params: URLSearchParams) =>
  Effect.gen(function*() {
    yield* searchGranted(access, catalog, type, params)
    const now = yield* Clock.currentTimeMillis
    const rows = yield* db.withReader((sql) =>
      Search.run(sql, { catalog, params, lenient: false, restriction: searchRestriction(sql, access, catalog, now) }, type)
    )
    const { count, offset, cursor } = rows.request.result
    const links = rows.paging.links.map((link) => ({ relation: link.relation, query: atPage(rows.paging.params, link.at) }))
    // The last page, when the matches were counted (and it can be reached by an offset).
    if (rows.total !== undefined && count > 0) {
      const last = Math.max(0, Math.floor((rows.total - 1) / count) * count)
      if (last <= maxOffset) links.push({ relation: "last", query: atPage(rows.paging.params, { offset: last }) })
    }
    const page: SearchPage = {
      matches: rows.matches.map((row) => JSON.parse(row.content) as Record<string, unknown>),
      total: rows.total,
      count,
      offset: cursor === undefined ? offset ?? 0 : undefined,
      links
    }
    return page
  }).pipe(
    Effect.mapError((error) => new Error(error.message)),
    Effect.catchAllDefect((defect) => Effect.fail(new Error(`searching ${type} failed: ${String(defect)}`)))
  )

/** Runs `effect` for a resolver: its value, or a rejection with its own error (whose message the field's error gives). */
const resolved = <A>(runtime: Runtime.Runtime<never>, effect: Effect.Effect<A, Error>): Promise<A> =>
  Runtime.runPromiseExit(runtime)(effect).then((exit) => (Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))))

/** Who asks, and where: what a query runs with. */
export interface GraphQLCaller {
  readonly access: Access
  readonly catalog: Catalog
  /** `[base]`, the FHIR base of this server: references under it are resolved as relative ones. */
  readonly base: string
}

/**
 * Runs a GraphQL request for `caller`: parsed, validated (with the depth bound) and executed against the
 * catalog's schema, or, with `instance`, against that resource's type with the resource as the query's root
 * (`[base]/{type}/{id}/$graphql`). The answer is GraphQL's `{ data, errors }`.
 */
export const runGraphQL = (asked: GraphQLRequest, caller: GraphQLCaller, instance?: { readonly type: string; readonly resource: Record<string, unknown> }) =>
  Effect.gen(function*() {
    const { access, catalog, base } = caller
    const db = yield* Database
    const runtime = yield* Effect.runtime<never>()
    const references = referenceLoader(db, catalog, access, (effect) => resolved(runtime, Effect.mapError(effect, (error) => new Error(error.message))))
    const budget = resourceBudget()
    const counted = <A>(count: (value: A) => number) => (value: A): A => {
      budget.take(count(value))
      return value
    }
    const contextValue: GraphQLContext = {
      resolve: (reference) => {
        const local = serverReference(catalog, reference, base)
        return local === undefined
          ? Promise.reject(new Error(`the reference ${JSON.stringify(reference)} is not to a resource of this server (Type/id)`))
          : references.load(local.type, local.id).then(counted(() => 1))
      },
      read: (type, id) => resolved(runtime, readAs(db, catalog, access, type, id)).then(counted(() => 1)),
      search: (type, params) => resolved(runtime, searchAs(db, catalog, access, type, params)).then(counted((found) => found.matches.length)),
      slices: new Map()
    }
    const schema = instance === undefined ? schemaOf(catalog) : instanceSchemaOf(catalog, instance.type)
    const result: ExecutionResult = yield* Effect.promise(async () => {
      let document
      try {
        document = fhirLiterals(schema, parse(asked.query))
      } catch (error) {
        return { errors: [error as GraphQLError] }
      }
      const invalid = validate(schema, document, [...specifiedRules, depthLimit])
      if (invalid.length > 0) return { errors: invalid }
      const executed = await execute({
        schema,
        document,
        contextValue,
        ...(instance === undefined ? {} : { rootValue: instance.resource }),
        ...(asked.variables === undefined ? {} : { variableValues: asked.variables }),
        ...(asked.operationName === undefined ? {} : { operationName: asked.operationName })
      })
      // @flatten, @first, @singleton and @slice (directives.ts): nothing to do for a query without them.
      return reshape(document, asked.operationName, executed, contextValue.slices, asked.variables)
    })
    return result
  })

/** GraphQL's answer as HTTP: 200, `application/json`. */
export const graphqlResponse = (result: ExecutionResult) => HttpServerResponse.text(JSON.stringify(result), { status: 200, contentType: "application/json" })
