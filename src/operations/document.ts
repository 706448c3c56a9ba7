/**
 * `$document` on Composition (https://hl7.org/fhir/R4/composition-operation-document.html):
 * `GET|POST [base]/Composition/{id}/$document` and `[base]/Composition/$document?id=...`. The answer is a
 * document Bundle (https://hl7.org/fhir/R4/documents.html): the Composition first, then every resource it
 * refers to, then every resource those refer to, following every literal reference each once, breadth first
 * in the order the references are written (the Composition's subject, encounter, author, attester,
 * custodian, relatesTo, event and sections first). A reference that cannot be resolved here refuses the whole
 * document (422 naming it and where it is); so does one the caller may not read (403). `persist=true` stores
 * the document as a Bundle through the ordinary create. The decisions are in docs/operations.md, "$document".
 */
import { Clock, Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { Rule } from "../auth/access/Access.ts"
import { ruleCondition } from "../auth/access/conditions.ts"
import { granted, seen } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import { parseJson } from "../json/Json.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { largeBody } from "../rest/largeBody.ts"
import { createResource, written } from "../rest/write.ts"
import { currentOf, readCurrent, readVersion } from "../store/reads.ts"
import { instantOf } from "../store/versions.ts"
import { definedInputs, readArguments } from "./arguments.ts"
import { literalReferences } from "./literalReferences.ts"
import type { OperationModule } from "./Operation.ts"

export const documentDefinition = "http://hl7.org/fhir/OperationDefinition/Composition-document"

/** The most resources one document holds, the Composition included; more is a 413. */
export const maxDocumentResources = 1000

const idPattern = /^[A-Za-z0-9\-.]{1,64}$/
const relative = /^([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([A-Za-z0-9\-.]{1,64}))?$/
const hasScheme = /^[A-Za-z][A-Za-z0-9+.-]*:/

/** The elements a document Bundle must carry the targets of (documents.html), in the order they come first. */
const compositionOrder = [
  "Composition.subject",
  "Composition.encounter",
  "Composition.author",
  "Composition.attester.party",
  "Composition.custodian",
  "Composition.relatesTo.target",
  "Composition.event.detail",
  "Composition.section"
]

const rankOf = (element: string): number => {
  const rank = compositionOrder.findIndex((path) => element === path || element.startsWith(`${path}.`))
  return rank === -1 ? compositionOrder.length : rank
}

/** A resource of the document: the version it holds, as stored, and whether that is the current one. */
interface Member {
  readonly type: string
  readonly id: string
  readonly version: number
  readonly content: string
  readonly current: boolean
}

/** A reference to follow: what it names, and who holds it where (for messages), the how-manieth of its round. */
interface Wanted {
  readonly order: number
  readonly type: string
  readonly id: string
  readonly version: number | undefined
  readonly reference: string
  readonly holder: string
  readonly expression: string
}

interface Problem {
  readonly wanted: Pick<Wanted, "order" | "reference" | "holder" | "expression">
  readonly text: string
}

const where = (wanted: Problem["wanted"]) => `${wanted.holder} refers to '${wanted.reference}' at ${wanted.expression}`

/** A 422 listing every reference that cannot be resolved. */
const unresolved = (problems: ReadonlyArray<Problem>): FhirError =>
  new FhirError({
    code: "processing",
    status: 422,
    diagnostics: `The document cannot be assembled: ${where(problems[0]!.wanted)}, ${problems[0]!.text}` +
      (problems.length > 1 ? ` (and ${problems.length - 1} more reference${problems.length === 2 ? "" : "s"})` : ""),
    issues: problems.map((problem) => ({
      severity: "error" as const,
      code: "processing",
      diagnostics: `${where(problem.wanted)}, ${problem.text}`,
      expression: [problem.wanted.expression]
    }))
  })

/** The target of a reference on this server, or why it has none. */
const targetOf = (reference: string, base: string, catalog: Catalog): { readonly type: string; readonly id: string; readonly version: number | undefined } | string => {
  const own = `${base.replace(/\/+$/, "")}/`
  const local = reference.startsWith(own) ? reference.slice(own.length) : reference
  const match = relative.exec(local)
  if (match === null) {
    return hasScheme.test(reference)
      ? "which is not on this server: a document is assembled only from resources this server holds"
      : "which is not a reference to a resource (Type/id, or an absolute URL on this server)"
  }
  if (!catalog.isResourceType(match[1]!)) return `but ${match[1]} is not a resource type this server knows`
  const version = match[3]
  if (version !== undefined && !/^[1-9][0-9]{0,15}$/.test(version)) return `but version '${version}' is not a version of this server`
  return { type: match[1]!, id: match[2]!, version: version === undefined ? undefined : Number(version) }
}

const keyOf = (type: string, id: string, version?: number) => version === undefined ? `${type}/${id}` : `${type}/${id}/_history/${version}`

/**
 * The references `members` hold that are not in the document yet, each once, in order (the Composition's own
 * by `compositionOrder` first), with the problems of those that name nothing on this server.
 */
const nextWanted = (
  request: FhirRequest,
  members: ReadonlyArray<Member>,
  held: ReadonlySet<string>,
  composition: boolean
): { readonly wanted: ReadonlyArray<Wanted>; readonly problems: ReadonlyArray<Problem> } => {
  const wanted: Array<Wanted> = []
  const problems: Array<Problem> = []
  const asked = new Set<string>()
  let order = 0
  for (const member of members) {
    const holder = `${member.type}/${member.id}`
    const found = literalReferences(request.catalog, parseJson(member.content) as Record<string, unknown>)
    const ordered = composition ? [...found].sort((a, b) => rankOf(a.element) - rankOf(b.element)) : found
    for (const { expression, reference } of ordered) {
      // A contained resource (`#id`), or the container itself (`#`), is part of the resource holding it.
      if (reference.startsWith("#")) continue
      const target = targetOf(reference, request.base, request.catalog)
      if (typeof target === "string") {
        problems.push({ wanted: { order: order++, reference, holder, expression }, text: target })
        continue
      }
      const key = keyOf(target.type, target.id, target.version)
      if (held.has(key) || asked.has(key)) continue
      asked.add(key)
      wanted.push({ ...target, order: order++, reference, holder, expression })
    }
  }
  return { wanted, problems }
}

/** The 413 of a document past `maxDocumentResources` or `server.max_body_bytes`. */
const tooLarge = (what: string) =>
  fail("too-costly", `The document would hold ${what}: it is not assembled (a document is never cut short)`, 413)

/**
 * Reads what `wanted` names, for a caller whose read rule on each type `ruleOf` gives. Resolved ones become
 * members (a versioned reference to a version that is no longer current: that version); the others problems.
 * A type the caller may not read at all, and under a restricted grant a resource outside it (or not there,
 * which the caller cannot tell apart), are a 403.
 */
const resolve = (request: FhirRequest, wanted: ReadonlyArray<Wanted>, rules: (type: string) => Effect.Effect<Rule, FhirError>) =>
  Effect.gen(function*() {
    const db = yield* Database
    const now = yield* Clock.currentTimeMillis
    const byType = new Map<string, Set<string>>()
    for (const item of wanted) byType.set(item.type, (byType.get(item.type) ?? new Set()).add(item.id))
    const restricted = new Set<string>()
    const conditions = new Map<string, Rule>()
    for (const [type] of byType) {
      const first = wanted.find((item) => item.type === type)!
      const rule = yield* Effect.mapError(rules(type), (error) =>
        error.status === 403 ? fail("forbidden", `The document cannot be assembled: ${where(first)}; ${error.diagnostics}`, 403) : error)
      conditions.set(type, rule)
      if (rule._tag !== "All") restricted.add(type)
    }
    return yield* db.withReader((sql) =>
      Effect.gen(function*() {
        const current = new Map<string, { readonly row: Member & { readonly deleted: boolean }; readonly allowed: boolean }>()
        for (const [type, ids] of byType) {
          const rows = yield* currentOf(sql, type, [...ids], ruleCondition(sql, request.catalog, type, conditions.get(type)!, now))
          for (const row of rows) {
            current.set(`${type}/${row.id}`, {
              row: { type, id: row.id, version: row.version, content: row.content ?? "", current: true, deleted: row.content === null },
              allowed: row.allowed
            })
          }
        }
        const members: Array<Member> = []
        const problems: Array<Problem> = []
        for (const item of wanted) {
          const found = current.get(`${item.type}/${item.id}`)
          if (restricted.has(item.type) && (found === undefined || found.row.deleted || !found.allowed)) {
            return yield* fail(
              "forbidden",
              `The document cannot be assembled: ${where(item)}, which the token may not read (it is outside what its scopes grant, or not known)`,
              403
            )
          }
          if (found === undefined) {
            problems.push({ wanted: item, text: "which is not known on this server" })
            continue
          }
          if (item.version === undefined || item.version === found.row.version) {
            if (found.row.deleted) problems.push({ wanted: item, text: "which was deleted" })
            else members.push(found.row)
            continue
          }
          const version = yield* readVersion(sql, item.type, item.id, item.version)
          if (version === undefined) problems.push({ wanted: item, text: `but ${item.type}/${item.id} has no version ${item.version}` })
          else if (version.content === null) problems.push({ wanted: item, text: `but version ${item.version} of ${item.type}/${item.id} is its deletion` })
          else members.push({ type: item.type, id: item.id, version: version.version, content: version.content, current: false })
        }
        return { members, problems }
      })
    )
  })

/**
 * The Composition and everything it leads to, in document order. Every round reads what the last one added
 * refers to, one statement per type (and per 500 ids).
 */
const assemble = (request: FhirRequest, composition: Member) =>
  Effect.gen(function*() {
    const rules = new Map<string, Rule>()
    const ruleOf = (type: string) => {
      const known = rules.get(type)
      return known !== undefined ? Effect.succeed(known) : Effect.tap(granted(request.access, request.catalog, type, "r"), (rule) => rules.set(type, rule))
    }
    const members: Array<Member> = []
    // A current version is held as `Type/id` and `Type/id/_history/n`, an older one as the latter only.
    const held = new Set<string>()
    let bytes = 0
    const hold = (member: Member): boolean => {
      if (held.has(keyOf(member.type, member.id, member.version))) return false
      held.add(keyOf(member.type, member.id, member.version))
      if (member.current) held.add(keyOf(member.type, member.id))
      members.push(member)
      bytes += Buffer.byteLength(member.content)
      return true
    }
    hold(composition)
    let last: ReadonlyArray<Member> = members.slice()
    for (let round = 0; last.length > 0; round++) {
      const next = nextWanted(request, last, held, round === 0)
      if (members.length + next.wanted.length > maxDocumentResources) {
        return yield* tooLarge(`more than ${maxDocumentResources} resources (the Composition and what it refers to, followed through every reference)`)
      }
      const found = next.wanted.length === 0 ? { members: [], problems: [] } : yield* resolve(request, next.wanted, ruleOf)
      // Every reference of the round that cannot be resolved, in the order they were found.
      const problems = [...next.problems, ...found.problems].sort((a, b) => a.wanted.order - b.wanted.order)
      if (problems.length > 0) return yield* unresolved(problems)
      // `Type/id` and `Type/id/_history/n` naming the same current version add it once.
      last = found.members.filter(hold)
      if (bytes > request.maxBodyBytes) {
        return yield* tooLarge(`more than ${request.maxBodyBytes} bytes of resources (server.max_body_bytes)`)
      }
    }
    return members
  })

/** The document Bundle as JSON text, its resources embedded as stored. */
const documentText = (request: FhirRequest, uuid: string, timestamp: string, members: ReadonlyArray<Member>): string => {
  const head = JSON.stringify({
    resourceType: "Bundle",
    identifier: { system: "urn:ietf:rfc:3986", value: `urn:uuid:${uuid}` },
    type: "document",
    timestamp
  })
  const entries = members.map((member) => `{"fullUrl":${JSON.stringify(`${request.base}/${member.type}/${member.id}`)},"resource":${member.content}}`)
  return `${head.slice(0, -1)},"entry":[${entries.join(",")}]}`
}

/** The Composition the call names: the instance of the path, or the `id` parameter at type level. */
const compositionId = (request: FhirRequest, pathId: string | undefined, given: string | null) =>
  Effect.gen(function*() {
    if (pathId !== undefined) {
      if (given !== null) {
        return yield* fail("invalid", `The parameter 'id' of $document is not used on an instance (${`Composition/${pathId}/$document`}): leave it out, or call [base]/Composition/$document?id=...`)
      }
      return pathId
    }
    if (given === null) return yield* fail("required", "$document on [base]/Composition needs the parameter 'id' (or call [base]/Composition/{id}/$document)")
    if (idPattern.test(given)) return given
    const own = `${request.base.replace(/\/+$/, "")}/Composition/`
    const local = given.startsWith(own) ? given.slice(own.length) : given.startsWith("Composition/") ? given.slice("Composition/".length) : undefined
    if (local !== undefined) {
      if (idPattern.test(local)) return local
      return yield* fail("invalid", `The value '${given}' of parameter 'id' of $document names no Composition: expected an id, Composition/{id} or ${own}{id}`)
    }
    if (hasScheme.test(given)) {
      return yield* fail("processing", `The Composition '${given}' is not on this server: $document assembles documents only from Compositions this server holds`, 422)
    }
    return yield* fail("invalid", `The value '${given}' of parameter 'id' of $document is neither a Composition id nor the URL of one on this server`)
  })

/** `$document` on `Composition/{id}`, or at type level with the `id` parameter. */
export const documentOperation = (request: FhirRequest, pathId: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const values = (yield* readArguments(request, "$document", definedInputs(catalog, documentDefinition))).values
    if (values.has("graph")) {
      return yield* fail(
        "not-supported",
        `The parameter 'graph' of $document (a GraphDefinition choosing what the document holds) is not supported by this server: leave it out, and the document holds everything the Composition leads to`,
        501
      )
    }
    const id = yield* compositionId(request, pathId, values.get("id"))
    const persist = values.get("persist") === "true"
    const rule = yield* granted(request.access, catalog, "Composition", "r")
    // Checked before the document is assembled: storing it is a create of a Bundle (docs/smart.md, "Scopes").
    if (persist) yield* granted(request.access, catalog, "Bundle", "c")
    const db = yield* Database
    const composition = yield* db.withReader((sql) =>
      Effect.gen(function*() {
        yield* seen(sql, catalog, "Composition", id, rule)
        return yield* readCurrent(sql, "Composition", id)
      })
    )
    if (composition === undefined) return yield* fail("not-found", `Composition/${id} is not known`)
    if (composition.content === null) return yield* fail("deleted", `Composition/${id} was deleted`)
    const members = yield* assemble(request, { type: "Composition", id, version: composition.version, content: composition.content, current: true })
    const uuid = randomUUID()
    const timestamp = instantOf((yield* Clock.currentTimeMillis) * 1000)
    const text = documentText(request, uuid, timestamp, members)
    if (!persist) return yield* largeBody(text, request.negotiated, catalog)
    // Stored as a create would store it (validated, indexed, on the change feed), under the id of its identifier.
    const { commitTs, value } = yield* createResource(request, "Bundle", parseJson(text) as Record<string, unknown>, uuid)
    return written(request, "Bundle", value.id, value.stored, commitTs, "created")
  })

export const documentModule = {
  name: "document",
  levels: ["type", "instance"],
  types: ["Composition"],
  definition: () => documentDefinition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => documentOperation(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof documentOperation>>
