/**
 * `POST [base]` with a batch or transaction Bundle (https://hl7.org/fhir/R4/http.html#transaction).
 * A transaction is one Writer command: its entries run in FHIR's order (DELETE, POST, PUT/PATCH, GET)
 * in one database transaction with one commit timestamp, and a failing entry fails the whole Bundle.
 * Conditions (ifNoneExist, `Type?search` URLs, conditional references) are matched inside that
 * transaction: a DELETE's before the deletes run, the others after. A batch runs each entry on its own.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { randomUUID } from "node:crypto"
import { operationOutcome, statusFor } from "../../http/OperationOutcome.ts"
import { fail, FhirError } from "../../http/FhirError.ts"
import type { FhirRequest } from "../FhirRequest.ts"
import { resourceBody } from "../respond.ts"
import { bundleText } from "../bundleText.ts"
import { type CheckedCreate, type CommandEnv, prevalidatedOf, settle, writeCreates } from "../../store/commands.ts"
import { Pacer, workPerYield } from "../../db/EventLoop.ts"
import { type Condition, matchFor, updateTarget } from "../../store/conditional.ts"
import { commitHeader, inTransaction, prevalidate } from "../write.ts"
import { conditionKey, conditionOf, interactionName, permissionOf, resolveReferences } from "./conditions.ts"
import { type Entry, parseBundle } from "./entries.ts"
import { type Rewrite, rewrite } from "./references.ts"
import { checkedCreate, type EntryResult, fromWritten, isConditional, type Plan, runEntry, statusLine, unsupported } from "./run.ts"

const order: Record<Entry["method"], number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2, GET: 3, HEAD: 3 }

const inEntry = (entry: Entry, error: FhirError): FhirError =>
  new FhirError({
    code: error.code,
    diagnostics: `Bundle.entry[${entry.index}] (${entry.method} ${entry.url}): ${error.diagnostics}`,
    ...(error.status === undefined ? {} : { status: error.status }),
    expression: [`Bundle.entry[${entry.index}]`],
    ...(error.issues === undefined ? {} : {
      issues: error.issues.map((issue) => ({ ...issue, diagnostics: `Bundle.entry[${entry.index}] (${entry.method} ${entry.url}): ${issue.diagnostics}` }))
    })
  })

const entryText = (result: EntryResult, outcome?: unknown): string => {
  const response = JSON.stringify({
    status: statusLine(result.status),
    ...(result.location ? { location: result.location } : {}),
    ...(result.etag ? { etag: result.etag } : {}),
    ...(result.lastModified ? { lastModified: result.lastModified } : {}),
    ...(outcome ? { outcome } : {})
  })
  return result.resource === undefined ? `{"response":${response}}` : `{"resource":${result.resource},"response":${response}}`
}

/** The resources the writes of a transaction change, by `Type/id`, with the entry that changes each. */
class Touched {
  private readonly seen = new Map<string, number>()
  add(entry: Entry, type: string, id: string): FhirError | undefined {
    const key = `${type}/${id}`
    const earlier = this.seen.get(key)
    if (earlier !== undefined && earlier !== entry.index) {
      return inEntry(entry, fail("invalid", `${key} is also changed by entry ${earlier}; a transaction may change a resource once`))
    }
    this.seen.set(key, entry.index)
    return undefined
  }
}

/** Writes that name one resource twice cannot be ordered: FHIR forbids them in a transaction. */
const touchedTwice = (entries: ReadonlyArray<Entry>): FhirError | undefined => {
  const touched = new Touched()
  for (const entry of entries) {
    if (entry.method === "GET" || entry.method === "HEAD" || entry.method === "POST" || entry.target._tag !== "instance") continue
    const problem = touched.add(entry, entry.target.type, entry.target.id)
    if (problem) return problem
  }
  return undefined
}

const typeOf = (entry: Entry): string => (entry.target._tag === "type" || entry.target._tag === "instance" ? entry.target.type : "")

/** Work units (see EventLoop.ts) of rewriting one entry's references. */
const rewriteUnits = 10

/** Batch entries run between two yields to the event loop. */
const batchEntriesPerYield = 16

/** What differs between planning a transaction's entries before it is queued and planning them in it. */
interface Planning<E, R> {
  /** What an entry's condition matches: undefined for an entry without one. */
  readonly match: (entry: Entry) => Effect.Effect<Plan["condition"], E, R>
  /** The `Type/id` of each conditional reference in an entry's resource (see `resolveReferences`). */
  readonly resolve: (entry: Entry, resource: Record<string, unknown>, created: ReadonlyMap<string, string>) => Effect.Effect<ReadonlyMap<string, string>, E, R>
  /** The resources the transaction's writes change so far, so that a PUT or PATCH may not change one again. */
  readonly touched: Touched
  readonly pacer: Pacer
}

/**
 * Each written entry's plan: the id it writes (matched by its condition or chosen in `ids`), and its resource
 * with the Bundle's fullUrl placeholders and conditional references replaced. Conditions are matched first,
 * in Bundle order, so that every fullUrl is known before any resource is rewritten; refusals name the entry.
 */
const planEntries = <E, R>(entries: ReadonlyArray<Entry>, ids: ReadonlyMap<number, string>, how: Planning<E, R>) =>
  Effect.gen(function*() {
    const plans = new Map<number, Plan>()
    const replacements = new Map<string, string>()
    const created = new Map<string, string>()
    for (const entry of entries) {
      if (entry.method === "DELETE" || entry.method === "GET" || entry.method === "HEAD") continue
      const condition = yield* how.match(entry)
      const type = typeOf(entry)
      let id: string | undefined
      if (entry.method === "POST") {
        id = condition?.match?.id ?? ids.get(entry.index)!
        if (condition !== undefined) created.set(conditionKey(condition.condition), `${type}/${id}`)
      } else if (entry.target._tag === "instance") {
        id = entry.target.id
      } else if (entry.method === "PUT") {
        const target = updateTarget(type, condition?.match, entry.resource!, ids.get(entry.index))
        if (target instanceof FhirError) return yield* inEntry(entry, target)
        id = target.id
      } else {
        id = condition?.match?.id
      }
      const twice = entry.method === "POST" || id === undefined ? undefined : how.touched.add(entry, type, id)
      if (twice) return yield* twice
      if (entry.fullUrl !== undefined && id !== undefined) replacements.set(entry.fullUrl, `${type}/${id}`)
      plans.set(entry.index, { resource: entry.resource, id: ids.get(entry.index), condition })
    }
    for (const entry of entries) {
      const plan = plans.get(entry.index)
      if (plan?.resource === undefined || (entry.method === "POST" && plan.condition?.match !== undefined)) continue
      // One pass rewrites the placeholders and notes whether there are conditional references; only then
      // are they resolved (reading the database) and the rewrite done again with them.
      let state: Rewrite = { replacements, unresolved: [] }
      let resource = rewrite(plan.resource, state) as Record<string, unknown>
      if (state.conditional === true) {
        const references = yield* how.resolve(entry, plan.resource, created)
        state = { replacements: references.size === 0 ? replacements : new Map([...replacements, ...references]), unresolved: [] }
        resource = rewrite(plan.resource, state) as Record<string, unknown>
      }
      if (state.unresolved.length > 0) {
        return yield* inEntry(entry, fail("invalid", `the reference ${state.unresolved[0]} matches no fullUrl of the Bundle`))
      }
      plans.set(entry.index, { ...plan, resource })
      yield* how.pacer.step(rewriteUnits)
    }
    return plans
  })

/**
 * The plans of a transaction whose entries name no condition (no `ifNoneExist`, no `Type?search` URL), made
 * before it is queued, as the transaction would make them. Undefined when that takes the database (a
 * conditional reference) or ends in a refusal (which the transaction then gives, after its DELETEs, as it
 * would have). No id can be changed twice here: without conditions every write names its id in its URL, and
 * `touchedTwice` has checked those.
 */
const planAhead = (entries: ReadonlyArray<Entry>, ids: ReadonlyMap<number, string>) =>
  Effect.orElseSucceed(
    planEntries(entries, ids, {
      match: () => Effect.succeed(undefined),
      resolve: () => Effect.fail("a conditional reference is resolved in the transaction"),
      touched: new Touched(),
      pacer: new Pacer(workPerYield)
    }),
    () => undefined
  )

/**
 * The resources of planned POST and PUT entries validated before the transaction is queued (their refusals
 * are the transaction's, in its order); the references they hold are checked in it.
 */
const validateAhead = (request: FhirRequest, entries: ReadonlyArray<Entry>, plans: ReadonlyMap<number, Plan>) =>
  Effect.map(
    Effect.forEach(entries, (entry) => {
      const plan = plans.get(entry.index)
      if (plan?.resource === undefined || entry.target._tag === "history" || entry.target._tag === "metadata") return Effect.succeed(undefined)
      const id = entry.method === "POST" ? plan.id : entry.method === "PUT" && entry.target._tag === "instance" ? entry.target.id : undefined
      if (id === undefined || (entry.target._tag !== "type" && entry.target._tag !== "instance")) return Effect.succeed(undefined)
      return prevalidate(request, "entry", entry.target.type, id, plan.resource)
    }),
    prevalidatedOf
  )

const transaction = (request: FhirRequest, entries: ReadonlyArray<Entry>) =>
  Effect.gen(function*() {
    const conditions = new Map<number, Condition>()
    for (const entry of entries) {
      const problem = unsupported(entry)
      if (problem) return yield* inEntry(entry, problem)
      const condition = conditionOf(entry, request.catalog)
      if (condition instanceof FhirError) return yield* inEntry(entry, condition)
      if (condition !== undefined) conditions.set(entry.index, condition)
    }
    const twice = touchedTwice(entries)
    if (twice) return yield* twice
    // Ids of resources a POST or a conditional PUT may create are chosen before anything runs.
    const ids = new Map<number, string>()
    for (const entry of entries) {
      if (entry.method === "POST" || (entry.method === "PUT" && isConditional(entry))) ids.set(entry.index, randomUUID())
    }
    // Without conditions, the entries are planned and their resources validated while other commands commit.
    const ahead = conditions.size === 0 ? yield* planAhead(entries, ids) : undefined
    const prevalidated = ahead === undefined ? undefined : yield* validateAhead(request, entries, ahead)
    const { commitTs, value } = yield* inTransaction(request, (transactionEnv) =>
      Effect.gen(function*() {
        const env = prevalidated === undefined ? transactionEnv : { ...transactionEnv, prevalidated }
        const named = <A, R>(entry: Entry, effect: Effect.Effect<A, FhirError | SqlError, R>) =>
          Effect.mapError(effect, (error) => (error instanceof FhirError ? inEntry(entry, error) : error))
        const matchOf = (entry: Entry) => {
          const condition = conditions.get(entry.index)
          if (condition === undefined) return Effect.succeed(undefined)
          return Effect.map(named(entry, Effect.zipRight(settle(env), matchFor(env, condition, interactionName(entry), permissionOf(entry)))), (match) => ({ condition, match }))
        }
        const touched = new Touched()
        const touch = (entry: Entry, id: string | undefined) => {
          const problem = id === undefined ? undefined : touched.add(entry, typeOf(entry), id)
          return problem ? Effect.fail(problem) : Effect.void
        }
        const results = new Map<number, EntryResult>()

        // 1. DELETE: conditions are matched against the database as it was, then the deletes run.
        const deletes: Array<[Entry, Plan]> = []
        for (const entry of entries.filter((e) => e.method === "DELETE")) {
          const condition = yield* matchOf(entry)
          yield* touch(entry, entry.target._tag === "instance" ? entry.target.id : condition?.match?.id)
          deletes.push([entry, { resource: undefined, condition }])
        }
        for (const [entry, plan] of deletes) results.set(entry.index, yield* named(entry, runEntry(env, entry, plan)))

        // 2. The other conditions are matched after the deletes; each fullUrl gets the resource its entry writes.
        // 3. Placeholders and conditional references in every resource that is written.
        const plans = ahead ?? (yield* planEntries(entries, ids, {
          match: matchOf,
          resolve: (entry, resource, created) => named(entry, Effect.zipRight(settle(env), resolveReferences(env, entry, resource, created))),
          touched,
          pacer: env.pacer
        }))

        // 4. POST, then PUT and PATCH, then GET and HEAD, each kind in Bundle order.
        // Consecutive plain creates are checked one by one and written together.
        const ordered = entries.filter((e) => e.method !== "DELETE").sort((a, b) => order[a.method] - order[b.method] || a.index - b.index)
        let creates: Array<readonly [Entry, CheckedCreate]> = []
        const writePending = Effect.suspend(() => {
          const group = creates
          creates = []
          return Effect.map(writeCreates(env, group.map(([, create]) => create), (n, error) => inEntry(group[n]![0], error)), (written) =>
            written.forEach((one, n) => results.set(group[n]![0].index, fromWritten(one, env.commit.commitTs))))
        })
        for (const entry of ordered) {
          const plan = plans.get(entry.index) ?? { resource: undefined }
          const check = checkedCreate(env, entry, plan)
          if (check !== undefined) {
            creates.push([entry, yield* named(entry, check)])
            continue
          }
          yield* writePending
          // Reads see the writes before them.
          if (entry.method === "GET" || entry.method === "HEAD") yield* settle(env)
          results.set(entry.index, yield* named(entry, runEntry(env, entry, plan)))
        }
        yield* writePending
        return results
      }))
    const now = yield* Clock.currentTimeMillis
    const text = bundleText({ type: "transaction-response" }, entries.map((entry) => entryText(value.get(entry.index)!)), now)
    return resourceBody(text, request.negotiated, request.catalog, { headers: commitHeader(commitTs) })
  })

/** One batch entry in its own transaction: its condition and conditional references are matched there. */
const batchEntry = (env: CommandEnv, entry: Entry) =>
  Effect.gen(function*() {
    const problem = unsupported(entry)
    if (problem) return yield* problem
    const read = conditionOf(entry, env.catalog)
    if (read instanceof FhirError) return yield* read
    const condition = read === undefined ? undefined : { condition: read, match: yield* matchFor(env, read, interactionName(entry), permissionOf(entry)) }
    let resource = entry.resource
    if (resource !== undefined && !(entry.method === "POST" && condition?.match !== undefined)) {
      const references = yield* resolveReferences(env, entry, resource, new Map())
      if (references.size > 0) resource = rewrite(resource, { replacements: references, unresolved: [] }) as Record<string, unknown>
    }
    return yield* runEntry(env, entry, { resource, condition })
  })

const batch = (request: FhirRequest, entries: ReadonlyArray<Entry>) =>
  Effect.gen(function*() {
    const texts: Array<string> = []
    let lastCommit: number | undefined
    // Each entry commits on its own; other requests get in between every few of them (see EventLoop.ts).
    const pacer = new Pacer(batchEntriesPerYield)
    for (const entry of entries) {
      yield* pacer.step(1)
      const outcome = yield* inTransaction(request, (env) => batchEntry(env, entry)).pipe(
        Effect.map(({ commitTs, value }) => {
          if (entry.method !== "GET" && entry.method !== "HEAD") lastCommit = commitTs
          return entryText(value)
        }),
        Effect.catchTag("FhirError", (error) => {
          const status = error.status ?? statusFor(error.code)
          const outcome = error.issues !== undefined && error.issues.length > 0
            ? { resourceType: "OperationOutcome", issue: error.issues }
            : operationOutcome([{ severity: "error", code: error.code, diagnostics: error.diagnostics }])
          return Effect.succeed(entryText({ status }, outcome))
        })
      )
      texts.push(outcome)
    }
    const now = yield* Clock.currentTimeMillis
    return resourceBody(bundleText({ type: "batch-response" }, texts, now), request.negotiated, request.catalog, {
      headers: lastCommit === undefined ? {} : commitHeader(lastCommit)
    })
  })

/** `POST [base]`. */
export const processBundle = (request: FhirRequest, body: Record<string, unknown>, maxEntries: number) =>
  Effect.gen(function*() {
    const parsed = parseBundle(body, request.base, maxEntries)
    if (parsed instanceof FhirError) return yield* parsed
    return yield* (parsed.type === "transaction" ? transaction(request, parsed.entries) : batch(request, parsed.entries))
  })
