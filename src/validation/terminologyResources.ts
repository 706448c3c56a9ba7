/**
 * Rules of the terminology resources themselves, against the code systems and value sets the server holds:
 * - CodeSystem (https://hl7.org/fhir/R4/codesystem.html): codes are unique; `count` agrees with the
 *   concepts of a complete system; a system without content has no concepts; a supplement says what it
 *   supplements and only adds to codes of that system; a concept's property value has the declared type.
 * - ValueSet (https://hl7.org/fhir/R4/valueset.html): `compose.include.system` is an absolute URI that
 *   names a code system (not a value set, not a supplement); a filter's property is one its system knows,
 *   and its value has the form of the property's type (a Coding is `system(|version)#code`, and names a
 *   code of a system held completely).
 * ConceptMap rules are in conceptMap.ts.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import type { Reporter } from "./Reporter.ts"
import { sctidProblem, snomed } from "./codes.ts"
import { loinc, loincProblem } from "./terminology.ts"
import { wrongValueSetMessage } from "./valueSetAuthoring.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:/

/** The types of CodeSystem.property.type and the value[x] member each one takes. */
const propertyValues: Readonly<Record<string, string>> = {
  code: "valueCode", Coding: "valueCoding", string: "valueString", integer: "valueInteger",
  boolean: "valueBoolean", dateTime: "valueDateTime", decimal: "valueDecimal"
}

const valueMember = (property: Record<string, unknown>): string | undefined => {
  for (const key in property) if (key.startsWith("value")) return key
  return undefined
}

const versioned = (codeSystem: CodeSystemDef): string =>
  codeSystem.version === undefined ? codeSystem.url : `${codeSystem.url}|${codeSystem.version}`

export const codeSystemRules = (value: Json, path: string, reporter: Reporter): void => {
  const content = value["content"]
  const declared = new Map<string, string>()
  for (const property of list(value["property"])) {
    // The first declaration of a code counts (a second one is an error of its own).
    if (isObject(property) && typeof property["code"] === "string" && typeof property["type"] === "string" && !declared.has(property["code"])) declared.set(property["code"], property["type"])
  }
  const supplements = typeof value["supplements"] === "string" ? value["supplements"] : undefined
  if (content === "supplement" && supplements === undefined) {
    reporter.report("error", "business-rule", path, "The code system is marked as a supplement, but it does not define what code system it supplements")
  }
  const supplementedSystem = supplements?.replace(/\|.*$/, "")
  const base = supplementedSystem === undefined ? undefined : reporter.registry.catalog.codeSystem(supplementedSystem)
  const codes = new Set<string>()
  let count = 0
  const visit = (concepts: unknown, at: string, depth: number): void => {
    if (depth > 64) return
    list(concepts).forEach((concept, i) => {
      if (!isObject(concept)) return
      count++
      const here = `${at}[${i}]`
      const code = concept["code"]
      if (typeof code === "string") {
        if (codes.has(code)) reporter.report("error", "business-rule", here, `The code '${code}' has already been defined`)
        codes.add(code)
        if (content === "supplement" && base !== undefined && base.content === "complete" && base.concept(code) === undefined) {
          reporter.report("error", "business-rule", here, `The code '${code}' is not declared in the base CodeSystem ${versioned(base)} so is not valid in the supplement`)
        } else if (supplements !== undefined && (supplementedSystem === loinc || supplementedSystem === snomed)) {
          // Systems whose content the server does not hold: a code of the wrong form cannot be one of theirs.
          const problem = supplementedSystem === loinc ? loincProblem(code) : sctidProblem(code)
          if (problem !== undefined) reporter.report("error", "business-rule", here, `The code '${code}' is not declared in the base CodeSystem ${supplementedSystem} (${problem}) so is not valid in the supplement`)
        }
      }
      list(concept["property"]).forEach((property, j) => {
        if (!isObject(property) || typeof property["code"] !== "string") return
        const type = declared.get(property["code"])
        const member = valueMember(property)
        if (type === undefined || member === undefined || propertyValues[type] === undefined || propertyValues[type] === member) return
        reporter.report("error", "business-rule", `${here}.property[${j}]`, `The property '${property["code"]}' has the invalid type '${member.slice(5, 6).toLowerCase()}${member.slice(6)}', when it is defined to have the type '${type}'`)
      })
      visit(concept["concept"], `${here}.concept`, depth + 1)
    })
  }
  visit(value["concept"], `${path}.concept`, 0)
  if (content === "complete" && count === 0 && supplements === undefined) {
    reporter.report("warning", "business-rule", path, "When a CodeSystem has content = 'complete', it doesn't make sense for there to be no concepts defined")
  }
  if (content === "not-present" && count > 0) {
    reporter.report("error", "invalid", `${path}.concept[0]`, "The code system says it has no content present, but concepts are found")
  }
  const stated = value["count"]
  if (typeof stated === "number") {
    if (content === "complete" && count !== stated) {
      reporter.report("error", "invalid", `${path}.count`, `The code system is complete, but the number of concepts (${count}) does not match the stated total number (${stated})`)
    } else if ((content === "fragment" || content === "example") && count >= stated) {
      reporter.report("warning", "invalid", `${path}.count`, `The code system is a fragment/example, but the number of concepts (${count}) exceeds or matches the stated total number (${stated})`)
    }
  }
}

/**
 * The properties a filter may use on any code system besides those it declares: the concept itself
 * (https://hl7.org/fhir/R4/valueset-filter-operator.html) and the properties every code system has
 * (https://hl7.org/fhir/R4/codesystem.html#defined-props).
 */
/** The types of the common properties that have one of their own. */
const commonPropertyTypes: ReadonlyMap<string, string> = new Map([["inactive", "boolean"], ["notSelectable", "boolean"]])

const commonProperties = new Set(["concept", "code", "display", "parent", "child", "partOf", "inactive", "deprecated", "notSelectable", "status", "definition", "designation"])

/** Why a filter value is not of the property's type, or undefined. */
const filterValueProblem = (reporter: Reporter, property: string, type: string, op: unknown, value: string): string | undefined => {
  if (op === "exists" || op === "regex") return undefined
  const values = op === "in" || op === "not-in" ? value.split(",") : [value]
  for (const given of values) {
    // A number or date may carry a comparison prefix, as search parameters have them (`lt2`).
    const item = (type === "integer" || type === "decimal" || type === "dateTime") && /^(eq|ne|gt|lt|ge|le|sa|eb|ap)/.test(given) ? given.slice(2) : given
    switch (type) {
      case "boolean":
        if (item !== "true" && item !== "false") return `The value for a filter based on property '${property}' must be either 'true' or 'false', not '${item}'`
        break
      case "integer":
        if (!/^-?[0-9]+$/.test(item)) return `The value for a filter based on property '${property}' must be integer value, not '${item}'`
        break
      case "decimal":
        if (!/^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/.test(item)) return `The value for a filter based on property '${property}' must be a decimal value, not '${item}'`
        break
      case "dateTime":
        if (!/^[0-9]{4}(-[0-9]{2}(-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?)?)?$/.test(item)) {
          return `The value for a filter based on property '${property}' must be a valid date(/time), not '${item}'`
        }
        break
      case "code":
        if (item.trim() !== item) return `The value for a filter based on property '${property}' must be a valid code, not '${item}'`
        break
      case "Coding": {
        const match = /^([A-Za-z][A-Za-z0-9+.-]*:[^|#\s]+)(?:\|([^#\s]+))?#(\S+)$/.exec(item)
        if (match === null) return `The value for a filter based on property '${property}' must be in the format system(|version)#code, not '${item}'`
        const system = match[1]!
        const version = match[2]
        const codeSystem = reporter.registry.catalog.codeSystem(version === undefined ? system : `${system}|${version}`) ?? reporter.registry.catalog.codeSystem(system)
        if (codeSystem !== undefined && codeSystem.content === "complete" && (version === undefined || codeSystem.version === undefined || codeSystem.version === version) && codeSystem.concept(match[3]!) === undefined) {
          return `The value for a filter based on property '${property}' is '${item}' which is not a valid code (Unknown code '${match[3]}' in the CodeSystem '${system}'${codeSystem.version === undefined ? "" : ` version '${codeSystem.version}'`})`
        }
        break
      }
    }
  }
  return undefined
}

/** The declared property types of a held code system, by code, read once per code system. */
const declaredTypes = new WeakMap<CodeSystemDef, ReadonlyMap<string, string>>()

const propertyTypes = (codeSystem: CodeSystemDef): ReadonlyMap<string, string> => {
  let types = declaredTypes.get(codeSystem)
  if (types === undefined) {
    const found = new Map<string, string>()
    for (const property of list(codeSystem.resource["property"])) {
      if (isObject(property) && typeof property["code"] === "string") found.set(property["code"], typeof property["type"] === "string" ? property["type"] : "")
    }
    types = found
    declaredTypes.set(codeSystem, types)
  }
  return types
}

export const valueSetRules = (value: Json, path: string, reporter: Reporter): void => {
  const compose = value["compose"]
  if (!isObject(compose)) return
  const catalog = reporter.registry.catalog
  for (const part of ["include", "exclude"] as const) {
    list(compose[part]).forEach((include, i) => {
      if (!isObject(include) || typeof include["system"] !== "string") return
      const system = include["system"]
      const at = `${path}.compose.${part}[${i}]`
      if (!absolute.test(system)) {
        reporter.report("error", "invalid", at, system.startsWith("#")
          ? "URI values in ValueSet.compose.include.system must be absolute. To reference a contained code system, use the full CodeSystem URL and reference it using the http://hl7.org/fhir/StructureDefinition/valueset-system extension"
          : "URI values in ValueSet.compose.include.system must be absolute")
        return
      }
      const version = typeof include["version"] === "string" ? include["version"] : undefined
      if (system === snomed) {
        // SNOMED CT's attributes (properties named by a concept id) are filtered by = and in only
        // (https://confluence.ihtsdotools.org/display/FHIR/Implementing+Terminology+Services+with+SNOMED+CT).
        list(include["filter"]).forEach((filter, j) => {
          if (!isObject(filter) || typeof filter["property"] !== "string" || typeof filter["op"] !== "string") return
          if (!/^[0-9]+$/.test(filter["property"])) return
          const problem = sctidProblem(filter["property"])
          if (problem !== undefined) {
            // Not a concept, so not one of SNOMED CT's attributes: a property the terminology ecosystem does not know.
            reporter.report("warning", "invalid", `${at}.filter[${j}]`, `The property '${filter["property"]}' is not known for the system '${system}', so may not be understood by the terminology ecosystem: ${problem}`)
          } else if (filter["op"] !== "=" && filter["op"] !== "in") {
            reporter.report("error", "invalid", `${at}.filter[${j}]`, `The operation '${filter["op"]}' is not allowed for property '${filter["property"]}' in system '${system}'. Allowed ops: =,in`)
          }
        })
      }
      const codeSystem = (version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)) ?? catalog.codeSystem(system)
      if (codeSystem === undefined) {
        const named = catalog.valueSet(system)
        if (named !== undefined) reporter.report("error", "invalid", at, wrongValueSetMessage(named, system))
        return
      }
      if (codeSystem.content === "supplement") {
        const supplemented = typeof codeSystem.resource["supplements"] === "string" ? codeSystem.resource["supplements"] : ""
        reporter.report("error", "invalid", at, `The value set references CodeSystem '${system}' which is a supplement. It must reference the underlying CodeSystem '${supplemented}' and use the http://hl7.org/fhir/StructureDefinition/valueset-supplement extension for the supplement`)
        return
      }
      if (codeSystem.content !== "complete" && codeSystem.content !== "fragment" && codeSystem.content !== "example") return
      const types = propertyTypes(codeSystem)
      list(include["filter"]).forEach((filter, j) => {
        if (!isObject(filter) || typeof filter["property"] !== "string") return
        const property = filter["property"]
        const type = types.get(property) ?? commonPropertyTypes.get(property)
        if (type === undefined) {
          if (!commonProperties.has(property)) {
            const known = [...types.keys(), ...commonProperties].join(",")
            reporter.report("warning", "invalid", `${at}.filter[${j}]`, `The property '${property}' is not known for the system '${system}', so may not be understood by the terminology ecosystem. Known properties for this system: ${known}`)
          }
          return
        }
        if (typeof filter["value"] !== "string") return
        const problem = filterValueProblem(reporter, property, type, filter["op"], filter["value"])
        if (problem !== undefined) reporter.report("error", "invalid", `${at}.filter[${j}]`, problem)
      })
    })
  }
}
