/**
 * Running a FHIR GraphQL request (https://hl7.org/fhir/R4/graphql.html; docs/graphql.md), wherever it is served
 * (`/graphql`, `[base]/$graphql`, `[base]/{type}/{id}/$graphql`): the query is parsed, validated and executed by
 * the `graphql` package against the catalog's schema (schema.ts); what it reads is read as the caller may
 * (docs/smart.md, "Scopes"): a resource the caller may not read is an error of its field, as one that does not
 * exist is; searches are REST's (the same parser, the same restriction, never lenient).
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Effect, Exit, Option, Runtime } from "effect"
import { execute, type ExecutionResult, getOperationAST } from "graphql"
import type { Access } from "../auth/access/Access.ts"
import { searchRestriction } from "../auth/access/conditions.ts"
import { granted, searchGranted, seen } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { systemOrigin } from "../db/ChangeFeed.ts"
import { fail } from "../http/FhirError.ts"
import { Admission } from "../http/FrontDoor.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import { callerKey } from "../http/Principal.ts"
import { commitHeader } from "../rest/write.ts"
import { ResourceStore } from "../store/ResourceStore.ts"
import * as Search from "../search/Search.ts"
import { atPage } from "../search/paging.ts"
import { maxOffset } from "../search/parse/result.ts"
import { readCurrent } from "../store/reads.ts"
import { resourceBudget } from "./bounds.ts"
import { reshape } from "./directives.ts"
import { FieldError, stated, withOutcome } from "./errors.ts"
import { prepare } from "./prepared.ts"
import { referenceLoader, serverReference } from "./references.ts"
import type { GraphQLRequest } from "./request.ts"
import { type GraphQLContext, instanceSchemaOf, schemaOf } from "./schema.ts"
import type { SearchPage } from "./searchFields.ts"
import { writeContext } from "./writes.ts"

/** Reads `type/id` as `access` may: the resource, or a failure whose message the answer's `errors` gives. */
const readAs = (db: Database["Type"], catalog: Catalog, access: Access, type: string, id: string) =>
  readResourceAs(db, catalog, access, type, id).pipe(
    Effect.mapError((error) => new FieldError(error.message, error._tag === "FhirError" ? error.code : "exception")),
    Effect.catchAllDefect((defect) => Effect.fail(new FieldError(`reading ${type}/${id} failed: ${String(defect)}`, "exception")))
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
    Effect.mapError((error) => new FieldError(error.message, error._tag === "SqlError" ? "exception" : error.code)),
    Effect.catchAllDefect((defect) => Effect.fail(new FieldError(`searching ${type} failed: ${String(defect)}`, "exception")))
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
  /** `server.max_bundle_entries`, for a Bundle a mutation writes. */
  readonly maxBundleEntries: number
  /** The request's method: a mutation is run only by POST. */
  readonly method: string
  /** Where it was asked (`/graphql`, `$graphql`), for the words of a refusal. */
  readonly label: string
}

/**
 * How the mutations of a request write (writes.ts): as its caller (the front door's admission: who, which
 * request, which client), with its access; each write first takes one resource of the query's budget (`take`).
 * `lastCommit` is the commit of the last one made.
 */
const mutationWrites = (caller: GraphQLCaller, runtime: Runtime.Runtime<never>, take: (count: number) => void) =>
  Effect.gen(function*() {
    const store = yield* ResourceStore
    const admission = yield* Effect.serviceOption(Admission)
    let lastCommit: number | undefined
    const writes = writeContext({
      scope: { base: caller.base, catalog: caller.catalog, maxBundleEntries: caller.maxBundleEntries, access: caller.access },
      origin: Option.isSome(admission)
        ? { actor: callerKey(admission.value.principal), requestId: admission.value.requestId, client: admission.value.client }
        : systemOrigin,
      run: (effect) => resolved(runtime, Effect.provideService(effect, ResourceStore, store)),
      committed: (commitTs) => {
        lastCommit = Math.max(lastCommit ?? 0, commitTs)
      }
    })
    const counted = <A extends ReadonlyArray<unknown>, B>(write: (...args: A) => Promise<B>) => (...args: A): Promise<B> => {
      take(1)
      return write(...args)
    }
    return {
      context: { create: counted(writes.create), update: counted(writes.update), delete: counted(writes.delete) },
      lastCommit: () => lastCommit
    }
  })

/** What a mutation sent by GET is answered (a 405). */
const mutationByGet = Symbol("mutation by GET")

/**
 * Runs a GraphQL request for `caller`: parsed, validated (with the depth bound) and executed against the
 * catalog's schema, or, with `instance`, against that resource's type with the resource as the query's root
 * (`[base]/{type}/{id}/$graphql`). The answer is GraphQL's `{ data, errors }` as `application/json`, with the
 * commit of the last write a mutation made (`X-Svc-Commit-Ts`); a mutation sent by GET is a 405.
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
    const writes = yield* mutationWrites(caller, runtime, (count) => budget.take(count))
    const contextValue: GraphQLContext = {
      ...writes.context,
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
    const readOnly = caller.method === "GET" || caller.method === "HEAD"
    const result = yield* Effect.promise(async (): Promise<ExecutionResult | typeof mutationByGet> => {
      try {
        const { document, errors } = prepare(schema, asked.query)
        if (document === undefined) return { errors }
        if (readOnly && getOperationAST(document, asked.operationName)?.operation === "mutation") return mutationByGet
        if (errors.length > 0) return { errors }
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
      } catch (error) {
        return { errors: [stated(error)] }
      }
    })
    if (result === mutationByGet) {
      return outcomeResponse("not-supported", `${caller.label}: a mutation is sent by POST, not GET`, { status: 405, headers: { allow: "POST" } })
    }
    const commitTs = writes.lastCommit()
    const errors = result.errors?.map((error) => withOutcome(stated(error)))
    return HttpServerResponse.text(JSON.stringify(errors === undefined ? result : { ...result, errors }), {
      status: 200,
      contentType: "application/json",
      ...(commitTs === undefined ? {} : { headers: commitHeader(commitTs) })
    })
  })
