/**
 * What `$lookup` answers of a concept (https://hl7.org/fhir/R4/codesystem-operation-lookup.html): the code
 * system's name and version, the concept's display (in `displayLanguage` when a designation has it), its
 * designations, and its properties: `parent` and `child` from the hierarchy (each with the other concept's
 * display as `description`), `inactive`, `definition` (R4 has no out parameter of that name), and the
 * concept's own properties as the code system writes them. `property` restricts the answer to the
 * properties named; `designation` and `lang.X` name the designations (all, or those in language X).
 */
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { isObject } from "../catalog/json.ts"
import { designations, displayIn, isInactive } from "./concepts.ts"
import { type Parameter, type Parameters, parametersOf, parts, value } from "./parameters.ts"

export interface LookupOptions {
  readonly displayLanguage: string | undefined
  /** The `property` parameters; empty: the server chooses (everything below). */
  readonly properties: ReadonlyArray<string>
}

/** The properties computed from the code system rather than copied from the concept's own. */
const computed = new Set(["parent", "child", "inactive", "definition"])

const property = (code: string, valueKey: string, given: unknown, description?: string): Parameter =>
  parts("property", [
    value("code", "Code", code),
    { name: "value", [valueKey]: given },
    ...(description === undefined ? [] : [value("description", "String", description)])
  ])

/** The concept's own properties, `value[x]` as written. */
const ownProperties = (codeSystem: CodeSystemDef, concept: ConceptDef): ReadonlyArray<{ readonly code: string; readonly parameter: Parameter }> => {
  const properties = concept.json["property"]
  if (!Array.isArray(properties)) return []
  return properties.flatMap((item) => {
    if (!isObject(item) || typeof item["code"] !== "string" || computed.has(item["code"])) return []
    const key = Object.keys(item).find((name) => name.startsWith("value"))
    if (key === undefined) return []
    // A code in the hierarchy's own terms (`subsumedBy`) is described by its display.
    const described = key === "valueCode" && typeof item[key] === "string" ? codeSystem.concept(item[key])?.display : undefined
    return [{ code: item["code"], parameter: property(item["code"], key, item[key], described) }]
  })
}

export const lookupAnswer = (codeSystem: CodeSystemDef, concept: ConceptDef, options: LookupOptions): Parameters => {
  const asked = new Set(options.properties)
  const wants = (code: string) => asked.size === 0 || asked.has(code)
  const out: Array<Parameter> = [
    value("name", "String", codeSystem.name ?? (typeof codeSystem.resource["title"] === "string" ? codeSystem.resource["title"] : codeSystem.url)),
    ...(codeSystem.version === undefined ? [] : [value("version", "String", codeSystem.version)]),
    value("display", "String", displayIn(concept, options.displayLanguage) ?? concept.code)
  ]
  for (const designation of designations(concept)) {
    if (!wants("designation") && !(designation.language !== undefined && asked.has(`lang.${designation.language}`))) continue
    out.push(parts("designation", [
      ...(designation.language === undefined ? [] : [value("language", "Code", designation.language)]),
      ...(designation.use === undefined ? [] : [{ name: "use", valueCoding: designation.use }]),
      value("value", "String", designation.value)
    ]))
  }
  const describe = (code: string) => codeSystem.concept(code)?.display
  if (wants("parent")) for (const parent of concept.parents) out.push(property("parent", "valueCode", parent, describe(parent)))
  if (wants("child")) for (const child of concept.children) out.push(property("child", "valueCode", child, describe(child)))
  if (wants("inactive")) out.push(property("inactive", "valueBoolean", isInactive(concept.json)))
  if (wants("definition") && concept.definition !== undefined) out.push(property("definition", "valueString", concept.definition))
  for (const own of ownProperties(codeSystem, concept)) if (wants(own.code)) out.push(own.parameter)
  return parametersOf(out)
}
