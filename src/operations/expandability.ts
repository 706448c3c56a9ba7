/**
 * `$expandability`, an operation of this server (R4 defines none like it; docs/terminology.md,
 * "$expandability"): `GET|POST [base]/ValueSet/$expandability?url=...` (or `valueSet` inline in a
 * Parameters body) and `[base]/ValueSet/{id}/$expandability` answer a Parameters saying whether `$expand`
 * can expand the ValueSet here: `expandable`, the number of codes (`count`) when it can, and each reason
 * when it cannot (an unknown value set or code system, one held without its codes, a filter not supported
 * or not valid, an import cycle, more codes than the limit), with notes on what an expansion takes on trust
 * and the code systems it reads. A ValueSet the server does not know is an answer (`expandable` false),
 * not a 404; a stored one the caller may not read is a 404 as for any read.
 */
import { Effect } from "effect"
import type { Json } from "../catalog/json.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { resourceBody } from "../rest/respond.ts"
import {
  cachedExpansion,
  defaultOptions,
  expandSource,
  maxExpansionCodes,
  type Note,
  type Outcome,
  type Problem,
  resolveValueSet
} from "../terminology/expansion.ts"
import { type InputParameter, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import { valueSetInput } from "./valueSetInput.ts"

/** The canonical url this server gives the operation (it has no OperationDefinition in R4). */
export const expandabilityDefinition = "urn:svc:OperationDefinition:ValueSet-expandability"

/** Its input parameters, declared here in the absence of a definition. */
export const expandabilityInputs: ReadonlyArray<InputParameter> = [
  { name: "url", type: "uri", min: 0, max: "1" },
  { name: "valueSetVersion", type: "string", min: 0, max: "1" },
  { name: "valueSet", type: "ValueSet", min: 0, max: "1" }
]

const part = (kind: string, subject: string | undefined, message: string): Json => ({
  part: [
    { name: "kind", valueCode: kind },
    ...(subject === undefined ? [] : [{ name: "subject", valueUri: subject }]),
    { name: "message", valueString: message }
  ]
})

const reasons = (problems: ReadonlyArray<Problem>): Array<Json> =>
  problems.map((problem) => ({ name: "reason", ...part(problem.kind, problem.subject, problem.message) }))

const notes = (list: ReadonlyArray<Note>): Array<Json> =>
  list.map((note) => ({ name: "note", ...part(note.kind, note.subject, note.message) }))

const merged = (a: ReadonlyArray<Problem>, b: ReadonlyArray<Problem>): ReadonlyArray<Problem> =>
  [...a, ...b.filter((problem) => !a.some((known) => known.message === problem.message))]

/** `$expandability` on ValueSet, of the instance `id` when given. */
export const expandabilityOperation = (request: FhirRequest, id: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const args = yield* readArguments(request, "$expandability", expandabilityInputs)
    const input = yield* valueSetInput(request, id, args, "$expandability")
    const url = args.values.get("url") ?? undefined
    const head: Array<Json> = url === undefined ? [] : [{ name: "url", valueUri: url }]
    const answer = (parameters: ReadonlyArray<Json>) =>
      resourceBody({ resourceType: "Parameters", parameter: [...head, ...parameters] }, request.negotiated, catalog)
    if ("unknown" in input) {
      return answer([
        { name: "expandable", valueBoolean: false },
        { name: "limit", valueInteger: maxExpansionCodes },
        { name: "reason", ...part("unknown-value-set", url, input.unknown) }
      ])
    }
    const source = input.target.kind === "resource" ? input.target.source : resolveValueSet(catalog, input.target.canonical)
    const whole: Outcome | "computing" | undefined = input.target.kind === "catalog"
      ? cachedExpansion(catalog, input.target.canonical)
      : source === undefined ? undefined : expandSource(catalog, source, defaultOptions)
    // Every reason that does not depend on the size: an expansion that keeps no code never runs out of room.
    const structural = source === undefined ? undefined : expandSource(catalog, source, { ...defaultOptions, accept: () => false })
    const structuralProblems = structural === undefined || structural.ok ? [] : structural.problems
    if (whole === undefined || whole === "computing" || !whole.ok) {
      const problems = whole === undefined || whole === "computing"
        ? merged([{ kind: "cycle", subject: input.target.kind === "catalog" ? input.target.canonical : undefined, message: `${input.name} imports itself` }], structuralProblems)
        : merged(structuralProblems, whole.problems)
      const tooCostly = problems.some((problem) => problem.kind === "too-costly")
      return answer([
        { name: "expandable", valueBoolean: false },
        ...(tooCostly ? [{ name: "countAtLeast", valueInteger: maxExpansionCodes + 1 }] : []),
        { name: "limit", valueInteger: maxExpansionCodes },
        ...reasons(problems)
      ])
    }
    return answer([
      { name: "expandable", valueBoolean: true },
      { name: "count", valueInteger: whole.entries.length },
      { name: "limit", valueInteger: maxExpansionCodes },
      ...notes(whole.notes),
      ...whole.used.map((system) => ({
        name: "codeSystem",
        part: [
          { name: "system", valueUri: system.system },
          ...(system.version === undefined ? [] : [{ name: "version", valueString: system.version }]),
          ...(system.content === undefined ? [] : [{ name: "content", valueCode: system.content }])
        ]
      }))
    ])
  })

export const expandabilityModule = {
  name: "expandability",
  levels: ["type", "instance"],
  types: ["ValueSet"],
  definition: () => expandabilityDefinition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => expandabilityOperation(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof expandabilityOperation>>
