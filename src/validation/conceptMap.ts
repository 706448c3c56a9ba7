/**
 * Rules of a ConceptMap (https://hl7.org/fhir/R4/conceptmap.html) against the code systems and value sets
 * the server holds:
 * - the map's source and target value sets (`source[x]`, `target[x]`) are value sets, not code systems or
 *   other resources;
 * - each group says which systems it maps (`group.source`, `group.target`); a warning when it does not, when
 *   the server does not know the system and the map has no value set to check against, or when it holds the
 *   system without all its content;
 * - the source and target codes are codes of their systems when the server holds them completely, and of the
 *   map's value sets when those can be expanded; their displays are the codes' displays. Codes of systems the
 *   server does not hold completely (SNOMED CT, LOINC, fragments left aside) are checked against the value
 *   set alone: an error when the value set's expansion lacks them, a warning when the system is unknown;
 * - a source code is not mapped twice to the same target code (or twice to no target code)
 *   (https://hl7.org/fhir/R4/conceptmap-definitions.html#ConceptMap.group.element.target.equivalence).
 * Unknown codes of a complete system and codes outside a value set of a held system are warnings, where the
 * HL7 reference validator makes them errors: R4's own maps join several codes with commas, and the version
 * of a system held here may be older than a map's.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { Catalog, CodeSystemDef } from "../catalog/Catalog.ts"
import type { Membership } from "./codes.ts"
import { snomed } from "./codes.ts"
import type { Reporter, Rule } from "./Reporter.ts"
import { displayProblem, loinc } from "./terminology.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const versioned = (codeSystem: CodeSystemDef): string =>
  codeSystem.version === undefined ? codeSystem.url : `${codeSystem.url}|${codeSystem.version}`

const withoutVersion = (url: string): string => url.replace(/\|.*$/, "")

/** Systems only a terminology server judges: their codes are checked against the map's value sets alone. */
const serverSide = new Set([snomed, loinc])

/** The type of a resource the catalog holds at `url` other than a ValueSet, if any. */
const otherResourceType = (catalog: Catalog, url: string): string | undefined => {
  if (catalog.codeSystem(url) !== undefined) return "CodeSystem"
  if (catalog.structureDefinition(url) !== undefined) return "StructureDefinition"
  if (catalog.searchParameterByUrl(url) !== undefined) return "SearchParameter"
  if (catalog.operations.some((operation) => operation.url === url)) return "OperationDefinition"
  return undefined
}

/** A map's source or target value set: its url, and its codes when it is held and can be expanded here. */
interface Scope {
  readonly url: string
  /** Undefined when the value set is not held. */
  readonly membership: Membership | undefined
  /** The version its compose states for a system, by system. */
  readonly versions: ReadonlyMap<string, string>
}

const readScope = (reporter: Reporter, value: Json, path: string, side: "source" | "target"): Scope | undefined => {
  const member = typeof value[`${side}Canonical`] === "string" ? `${side}Canonical` : `${side}Uri`
  const url = value[member]
  if (typeof url !== "string") return undefined
  const catalog = reporter.registry.catalog
  const valueSet = catalog.valueSet(withoutVersion(url))
  if (valueSet === undefined) {
    const other = otherResourceType(catalog, withoutVersion(url))
    if (other !== undefined) reporter.report("error", "invalid", `${path}.${member}`, `The ${side} of a ConceptMap must be a ValueSet, but '${url}' is a ${other}`)
    return { url, membership: undefined, versions: new Map() }
  }
  const versions = new Map<string, string>()
  for (const include of valueSet.compose?.include ?? []) {
    if (include.system !== undefined && include.version !== undefined) versions.set(include.system, include.version)
  }
  return { url, membership: reporter.registry.membership(url), versions }
}

/**
 * How the codes of one side of a group are checked: against the system held completely (`held`), against
 * the map's value set alone (`scope`: the system is known to the server, or `unknown`), or not at all.
 */
type Side =
  | { readonly kind: "held"; readonly codeSystem: CodeSystemDef; readonly system: string }
  | { readonly kind: "scope"; readonly system: string; readonly version: string | undefined; readonly known: "known" | "unknown" | "otherVersion" }
  | { readonly kind: "none" }

const readSide = (reporter: Reporter, group: Json, at: string, side: "source" | "target", scope: Scope | undefined): Side => {
  const given = group[side]
  const sideName = side === "source" ? "Source" : "Target"
  if (typeof given !== "string") {
    reporter.report("warning", "required", at, `The group names no ${side} code system, so its ${side} codes cannot be checked`)
    return { kind: "none" }
  }
  const versionGiven = group[`${side}Version`]
  const system = withoutVersion(given)
  const version = typeof versionGiven === "string" ? versionGiven
    : given.includes("|") ? given.slice(given.indexOf("|") + 1)
    : scope?.versions.get(given)
  const catalog = reporter.registry.catalog
  if (serverSide.has(system)) return { kind: "scope", system, version, known: "known" }
  const exact = version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)
  const codeSystem = exact ?? catalog.codeSystem(system)
  if (codeSystem === undefined) {
    if (scope === undefined) {
      reporter.report("warning", "not-found", `${at}.${side}`, `The ${side} code system ${given} is not known to this server, and the map has no ${side} value set, so the ${side} codes cannot be checked`)
    }
    return { kind: "scope", system, version, known: "unknown" }
  }
  const content = codeSystem.content
  if (content === "not-present" || content === "example" || content === "fragment") {
    reporter.report("warning", "not-found", `${at}.${side}`, `${sideName} code system ${given} is held without all its content (content = ${content}), so the ${side} codes cannot be checked against it`)
    // A value set that takes the codes of a fragment knows only the fragment's codes.
    if (content === "fragment") return { kind: "none" }
    const otherVersion = version !== undefined && exact === undefined && codeSystem.version !== undefined && codeSystem.version !== version
    return { kind: "scope", system, version, known: otherVersion ? "otherVersion" : "known" }
  }
  // A complete system is used in the version held, even when the map names another one.
  return content === "complete" ? { kind: "held", codeSystem, system } : { kind: "none" }
}

/** Checks one source or target code (with its display) of a group. */
const checkCode = (reporter: Reporter, item: Json, at: string, side: "source" | "target", how: Side, scope: Scope | undefined): void => {
  const code = item["code"]
  if (typeof code !== "string" || how.kind === "none") return
  const membership = scope?.membership
  if (how.kind === "held") {
    const codeSystem = how.codeSystem
    const concept = codeSystem.concept(code)
    if (concept === undefined) {
      reporter.report("warning", "code-invalid", `${at}.code`, `The ${side} code '${code}' is not valid in the code system ${versioned(codeSystem)}`)
      return
    }
    const display = item["display"]
    if (typeof display === "string" && displayProblem(codeSystem.url, concept, display) !== undefined) {
      const displays = [concept.display, ...list(concept.json["designation"]).map((d) => (isObject(d) ? d["value"] : undefined))].filter((d) => typeof d === "string")
      reporter.report("warning", "code-invalid", `${at}.code`, `The ${side} display '${display}' for the code '${versioned(codeSystem)}#${code}' is not valid. Possible displays: ${displays.map((d) => `'${d}'`).join(", ")}`)
    }
    if (scope === undefined || membership === undefined) return
    if (!membership.known) {
      reporter.report("warning", "required", `${at}.code`, `The ${side} code '${code}' of ${versioned(codeSystem)} could not be checked against the value set ${scope.url}: ${membership.problem}`)
    } else if (!membership.pairs.has(`${how.system}|${code}`)) {
      reporter.report("warning", "code-invalid", `${at}.code`, `The ${side} code '${code}' is not valid in the value set ${scope.url}`)
    }
    return
  }
  // Not held completely: the value set alone says whether the code belongs.
  if (scope === undefined || membership === undefined || !membership.known || membership.pairs.has(`${how.system}|${code}`)) return
  const valueSet = withoutVersion(scope.url)
  if (how.known === "unknown") {
    reporter.report("warning", "business-rule", `${at}.code`, `The ${side} code '${code}' is not in the value set '${valueSet}', and its system ${how.system} is not known to this server, so whether it is valid could not be decided`)
  } else if (how.known === "otherVersion") {
    reporter.report("warning", "business-rule", `${at}.code`, `The ${side} code '${code}' is not in the value set '${valueSet}', and version ${how.version} of its system ${how.system} is not known to this server, so whether it is valid could not be decided`)
  } else {
    reporter.report("error", "business-rule", `${at}.code`, `The ${side} code '${code}' in the system ${how.system}${how.version === undefined ? "" : ` version ${how.version}`} is not valid in the value set '${valueSet}'`)
  }
}

const target = (code: string | undefined): string => (code === undefined ? "no target code" : `the code '${code}'`)

const conceptMap: Rule = (value, path, reporter) => {
  const sourceScope = readScope(reporter, value, path, "source")
  const targetScope = readScope(reporter, value, path, "target")
  list(value["group"]).forEach((group, g) => {
    if (!isObject(group)) return
    const at = `${path}.group[${g}]`
    const source = readSide(reporter, group, at, "source", sourceScope)
    const targetSide = readSide(reporter, group, at, "target", targetScope)
    // The equivalence of each source code without a target code, and of each source and target pair.
    const unmapped = new Map<string, string>()
    const pairs = new Map<string, Map<string, string>>()
    list(group["element"]).forEach((element, e) => {
      if (!isObject(element)) return
      const here = `${at}.element[${e}]`
      checkCode(reporter, element, here, "source", source, sourceScope)
      const sourceCode = typeof element["code"] === "string" ? element["code"] : undefined
      list(element["target"]).forEach((item, t) => {
        if (!isObject(item)) return
        const there = `${here}.target[${t}]`
        checkCode(reporter, item, there, "target", targetSide, targetScope)
        const equivalence = item["equivalence"]
        if (sourceCode === undefined || typeof equivalence !== "string") return
        const targetCode = typeof item["code"] === "string" ? item["code"] : undefined
        const duplicate = (before: string): void => {
          reporter.report("warning", "business-rule", there, before === equivalence
            ? `A '${equivalence}' mapping from the code '${sourceCode}' to ${target(targetCode)} has already been defined`
            : `A '${before}' mapping from the code '${sourceCode}' to ${target(targetCode)} has already been defined, but this one says '${equivalence}'`)
        }
        if (targetCode === undefined) {
          const before = unmapped.get(sourceCode)
          if (before === undefined) unmapped.set(sourceCode, equivalence)
          else duplicate(before)
          return
        }
        const without = unmapped.get(sourceCode)
        if (without !== undefined) {
          reporter.report("warning", "business-rule", there, `The code '${sourceCode}' has already been mapped as '${without}' to no target code, but this one maps it as '${equivalence}' to the code '${targetCode}'`)
        }
        let targets = pairs.get(sourceCode)
        if (targets === undefined) pairs.set(sourceCode, targets = new Map())
        const before = targets.get(targetCode)
        if (before === undefined) targets.set(targetCode, equivalence)
        else duplicate(before)
      })
    })
  })
}

export const conceptMapRules: ReadonlyArray<readonly [string, Rule]> = [["ConceptMap", conceptMap]]
