/**
 * `POST [base]` with a batch or transaction Bundle (https://hl7.org/fhir/R4/http.html#transaction).
 * A transaction is one Writer command: its entries run in FHIR's order (DELETE, POST, PUT/PATCH, GET)
 * in one database transaction with one commit timestamp, and a failing entry fails the whole Bundle.
 * A batch runs each entry on its own.
 */
import { Clock, Effect } from "effect"
import { randomUUID } from "node:crypto"
import { operationOutcome, statusFor } from "../../http/OperationOutcome.ts"
import { fail, FhirError } from "../FhirError.ts"
import type { FhirRequest } from "../FhirRequest.ts"
import { resourceBody } from "../respond.ts"
import { bundleText } from "../bundleText.ts"
import { commitHeader, inTransaction } from "../write.ts"
import { type Entry, parseBundle } from "./entries.ts"
import { type Rewrite, rewrite } from "./references.ts"
import { type EntryResult, runEntry, statusLine, unsupported } from "./run.ts"

const order: Record<Entry["method"], number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2, GET: 3, HEAD: 3 }

const inEntry = (entry: Entry, error: FhirError): FhirError =>
  new FhirError({
    code: error.code,
    diagnostics: `Bundle.entry[${entry.index}] (${entry.method} ${entry.url}): ${error.diagnostics}`,
    ...(error.status === undefined ? {} : { status: error.status }),
    expression: [`Bundle.entry[${entry.index}]`]
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

/** Writes that name one resource twice cannot be ordered: FHIR forbids them in a transaction. */
const touchedTwice = (entries: ReadonlyArray<Entry>): FhirError | undefined => {
  const seen = new Map<string, number>()
  for (const entry of entries) {
    if (entry.method === "GET" || entry.method === "HEAD" || entry.method === "POST" || entry.target._tag !== "instance") continue
    const key = `${entry.target.type}/${entry.target.id}`
    const earlier = seen.get(key)
    if (earlier !== undefined) return inEntry(entry, fail("invalid", `${key} is also changed by entry ${earlier}; a transaction may change a resource once`))
    seen.set(key, entry.index)
  }
  return undefined
}

const transaction = (request: FhirRequest, entries: ReadonlyArray<Entry>) =>
  Effect.gen(function*() {
    for (const entry of entries) {
      const problem = unsupported(entry)
      if (problem) return yield* inEntry(entry, problem)
    }
    const twice = touchedTwice(entries)
    if (twice) return yield* twice
    // Ids of created resources are chosen before anything runs, so every placeholder can be rewritten up front.
    const ids = new Map<number, string>()
    const replacements = new Map<string, string>()
    for (const entry of entries) {
      if (entry.method === "POST" && entry.target._tag === "type") {
        const id = randomUUID()
        ids.set(entry.index, id)
        if (entry.fullUrl !== undefined) replacements.set(entry.fullUrl, `${entry.target.type}/${id}`)
      } else if ((entry.method === "PUT" || entry.method === "PATCH") && entry.target._tag === "instance" && entry.fullUrl !== undefined) {
        replacements.set(entry.fullUrl, `${entry.target.type}/${entry.target.id}`)
      }
    }
    const resources = new Map<number, Record<string, unknown>>()
    for (const entry of entries) {
      if (entry.resource === undefined) continue
      const state: Rewrite = { replacements, unresolved: [] }
      resources.set(entry.index, rewrite(entry.resource, state) as Record<string, unknown>)
      if (state.unresolved.length > 0) {
        return yield* inEntry(entry, fail("invalid", `the reference ${state.unresolved[0]} matches no fullUrl of the Bundle`))
      }
    }
    const ordered = [...entries].sort((a, b) => order[a.method] - order[b.method] || a.index - b.index)
    const { commitTs, value } = yield* inTransaction(request, (env) =>
      Effect.gen(function*() {
        const results = new Map<number, EntryResult>()
        for (const entry of ordered) {
          const result = yield* runEntry(env, entry, resources.get(entry.index), ids.get(entry.index)).pipe(
            Effect.mapError((error) => (error instanceof FhirError ? inEntry(entry, error) : error))
          )
          results.set(entry.index, result)
        }
        return results
      }))
    const now = yield* Clock.currentTimeMillis
    const text = bundleText({ type: "transaction-response" }, entries.map((entry) => entryText(value.get(entry.index)!)), now)
    return resourceBody(text, request.negotiated, request.catalog, { headers: commitHeader(commitTs) })
  })

const batch = (request: FhirRequest, entries: ReadonlyArray<Entry>) =>
  Effect.gen(function*() {
    const texts: Array<string> = []
    let lastCommit: number | undefined
    for (const entry of entries) {
      const outcome = yield* inTransaction(request, (env) => runEntry(env, entry, entry.resource, undefined)).pipe(
        Effect.map(({ commitTs, value }) => {
          if (entry.method !== "GET" && entry.method !== "HEAD") lastCommit = commitTs
          return entryText(value)
        }),
        Effect.catchTag("FhirError", (error) => {
          const status = error.status ?? statusFor(error.code)
          return Effect.succeed(entryText({ status }, operationOutcome([{ severity: "error", code: error.code, diagnostics: error.diagnostics }])))
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
