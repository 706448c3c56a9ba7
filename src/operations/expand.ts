/**
 * `$expand` (https://hl7.org/fhir/R4/valueset-operation-expand.html): `GET|POST [base]/ValueSet/$expand`
 * with `url` (and `valueSetVersion`) or, on POST, a ValueSet as the `valueSet` parameter of a Parameters
 * body; `GET|POST [base]/ValueSet/{id}/$expand` for a stored one. The parameters are those of R4's
 * OperationDefinition ValueSet-expand; the answer is the ValueSet with its `expansion`
 * (terminology/expansionResource.ts). A ValueSet that cannot be expanded here is a 422 naming every reason,
 * one larger than the limit a 413 (`too-costly`), an unknown one a 404. docs/terminology.md has the decisions.
 */
import { randomUUID } from "node:crypto"
import { Clock, Effect } from "effect"
import type { Json } from "../catalog/json.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { largeBody } from "../rest/largeBody.ts"
import { maxExpansionCodes, type Note, type Problem, type VersionRules } from "../terminology/expansion.ts"
import { expansionQuery, type Narrowing } from "../terminology/expansionQuery.ts"
import { type DesignationWanted, expansionResource, type Layout } from "../terminology/expansionResource.ts"
import { type Arguments, definedInputs, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import { valueSetInput } from "./valueSetInput.ts"

export const expandDefinition = "http://hl7.org/fhir/OperationDefinition/ValueSet-expand"

const booleanOf = (args: Arguments, name: string): boolean | undefined => {
  const value = args.values.get(name)
  return value === null ? undefined : value === "true"
}

const integerOf = (args: Arguments, name: string) =>
  Effect.gen(function*() {
    const value = args.values.get(name)
    if (value === null) return undefined
    const number = Number(value)
    if (!Number.isSafeInteger(number) || number < 0) {
      return yield* fail("invalid", `The value '${value}' of parameter '${name}' of $expand cannot be read: expected a whole number, 0 or more`)
    }
    return number
  })

/** `system|version` values by system (`system-version`, `check-system-version`, `force-system-version`). */
const versionsOf = (args: Arguments, name: string) =>
  Effect.gen(function*() {
    const out = new Map<string, string>()
    for (const value of args.values.getAll(name)) {
      const bar = value.indexOf("|")
      if (bar <= 0 || bar === value.length - 1) {
        return yield* fail("invalid", `The value '${value}' of parameter '${name}' of $expand cannot be read: expected system|version`)
      }
      const system = value.slice(0, bar)
      if (out.has(system) && out.get(system) !== value.slice(bar + 1)) {
        return yield* fail("invalid", `The parameter '${name}' of $expand names two versions of ${system}`)
      }
      out.set(system, value.slice(bar + 1))
    }
    return out as ReadonlyMap<string, string>
  })

const designationsOf = (args: Arguments): ReadonlyArray<DesignationWanted> =>
  args.values.getAll("designation").map((value) => {
    const bar = value.indexOf("|")
    return bar < 0 ? { system: undefined, code: value } : { system: value.slice(0, bar) === "" ? undefined : value.slice(0, bar), code: value.slice(bar + 1) }
  })

/** What the request echoes in `expansion.parameter`, by the type of each. */
const echoed: ReadonlyArray<readonly [string, "valueUri" | "valueString" | "valueInteger" | "valueBoolean" | "valueCode"]> = [
  ["url", "valueUri"], ["valueSetVersion", "valueString"], ["filter", "valueString"], ["count", "valueInteger"],
  ["offset", "valueInteger"], ["includeDesignations", "valueBoolean"], ["designation", "valueString"],
  ["includeDefinition", "valueBoolean"], ["activeOnly", "valueBoolean"], ["excludeNested", "valueBoolean"],
  ["excludeNotForUI", "valueBoolean"], ["excludePostCoordinated", "valueBoolean"], ["displayLanguage", "valueCode"],
  ["exclude-system", "valueUri"], ["system-version", "valueUri"], ["check-system-version", "valueUri"],
  ["force-system-version", "valueUri"]
]

const echo = (args: Arguments): Array<Json> =>
  echoed.flatMap(([name, type]) =>
    args.values.getAll(name).map((value) => ({
      name,
      [type]: type === "valueInteger" ? Number(value) : type === "valueBoolean" ? value === "true" : value
    })))

const warnings = (notes: ReadonlyArray<Note>): Array<Json> => notes.map((note) => ({ name: "warning", valueString: note.message }))

const issueCode = (problem: Problem): string => {
  switch (problem.kind) {
    case "unknown-code-system":
    case "unknown-value-set":
      return "not-found"
    case "no-content":
    case "unsupported-filter":
      return "not-supported"
    case "invalid-filter":
    case "no-definition":
      return "invalid"
    case "version-conflict":
      return "business-rule"
    case "cycle":
    case "too-costly":
      return problem.kind === "cycle" ? "processing" : "too-costly"
  }
}

/** Why `name` cannot be expanded: a 413 when only its size stands in the way, a 422 with every reason otherwise. */
export const refusal = (name: string, problems: ReadonlyArray<Problem>, operation: string): FhirError => {
  const others = problems.filter((problem) => problem.kind !== "too-costly")
  if (others.length === 0) {
    return fail(
      "too-costly",
      `${operation}: ${problems[0]?.message ?? `${name} is too large`}, the most this server expands (${maxExpansionCodes}); ` +
        "a filter (the parameter 'filter', activeOnly, exclude-system) that leaves fewer codes is served"
    )
  }
  return new FhirError({
    code: "processing",
    status: 422,
    diagnostics: `${name} cannot be expanded here: ${others[0]!.message}`,
    issues: problems.map((problem) => ({ severity: "error" as const, code: issueCode(problem), diagnostics: problem.message }))
  })
}

/** `$expand` on ValueSet, of the instance `id` when given. */
export const expandOperation = (request: FhirRequest, id: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const args = yield* readArguments(request, "$expand", definedInputs(catalog, expandDefinition))
    const input = yield* valueSetInput(request, id, args, "$expand")
    if ("unknown" in input) return yield* fail("not-found", input.unknown)
    if (args.values.has("date")) {
      return yield* fail("not-supported", "$expand does not take 'date': this server holds the current definitions only", 400)
    }
    const versions: VersionRules = {
      system: yield* versionsOf(args, "system-version"),
      force: yield* versionsOf(args, "force-system-version"),
      check: yield* versionsOf(args, "check-system-version")
    }
    const narrowing: Narrowing = {
      filter: args.values.get("filter") ?? undefined,
      activeOnly: booleanOf(args, "activeOnly") === true,
      excludeNotForUI: booleanOf(args, "excludeNotForUI") === true,
      excludeSystems: args.values.getAll("exclude-system"),
      versions
    }
    const outcome = expansionQuery(catalog, input.target, narrowing)
    if (outcome === undefined) return yield* fail("not-found", `${input.name} is not known to this server`)
    if (!outcome.ok) return yield* refusal(input.name, outcome.problems, "$expand")
    const now = yield* Clock.currentTimeMillis
    const designations = designationsOf(args)
    const layout: Layout = {
      count: yield* integerOf(args, "count"),
      offset: (yield* integerOf(args, "offset")) ?? 0,
      nested: booleanOf(args, "excludeNested") === false,
      includeDesignations: booleanOf(args, "includeDesignations") === true,
      designations,
      displayLanguage: args.values.get("displayLanguage") ?? undefined,
      includeDefinition: booleanOf(args, "includeDefinition") === true,
      parameters: [...echo(args), ...warnings(outcome.notes)],
      identifier: `urn:uuid:${randomUUID()}`,
      timestamp: new Date(now).toISOString()
    }
    const resource = expansionResource(catalog, input.resource, input.id, outcome.entries, outcome.used, layout)
    return yield* largeBody(JSON.stringify(resource), request.negotiated, catalog)
  })

export const expandModule = {
  name: "expand",
  levels: ["type", "instance"],
  types: ["ValueSet"],
  definition: () => expandDefinition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => expandOperation(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof expandOperation>>
