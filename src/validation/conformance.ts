/**
 * Rules of the conformance resources that their StructureDefinitions state in prose, checked as the HL7
 * reference validator checks them:
 * - SearchParameter (https://hl7.org/fhir/R4/searchparameter.html): characters of the code that mean
 *   something in a search url, an expression that names a resource type outside `base`, a derivation
 *   (`derivedFrom`) that changes the type, widens the base or rewrites the expression, a composite with
 *   fewer than two components.
 * - CapabilityStatement (https://hl7.org/fhir/R4/capabilitystatement.html): a search parameter whose
 *   definition is known and has another type.
 * - ImplementationGuide (https://hl7.org/fhir/R4/implementationguide.html): its FHIR version, the canonical
 *   and package of its dependencies, and what a guide HL7 publishes states about itself.
 * - StructureDefinition (https://hl7.org/fhir/R4/structuredefinition.html): derivation, kind and type
 *   against the base definition, the namespace of a logical model's type, element paths, slicing on the
 *   root, and the StructureDefinitions that `type.profile` and `type.targetProfile` name.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { ElementDefinition, StructureDefinition } from "../catalog/definitions.ts"
import type { Reporter } from "./Reporter.ts"
import { equalsFixed } from "./values.ts"
import { canonicalResourceTypes } from "./canonical.ts"

type Rule = (value: Json, path: string, reporter: Reporter) => void

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)
const withoutVersion = (url: string): string => (url.includes("|") ? url.slice(0, url.indexOf("|")) : url)

/** The parts of a FHIRPath union `a | b | c`, split outside brackets and quotes. */
export const unionBranches = (expression: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  let depth = 0
  let quote: string | undefined
  let start = 0
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i]!
    if (quote !== undefined) {
      if (c === "\\") i++
      else if (c === quote) quote = undefined
    } else if (c === "'" || c === "`" || c === "\"") quote = c
    else if (c === "(" || c === "[" || c === "{") depth++
    else if (c === ")" || c === "]" || c === "}") depth--
    else if (c === "|" && depth === 0) {
      out.push(expression.slice(start, i).trim())
      start = i + 1
    }
  }
  out.push(expression.slice(start).trim())
  return out
}

/** The name a union branch starts with, inside any opening brackets: `Patient` of `(Patient.name as HumanName)`. */
const leadingName = (branch: string): string | undefined => /^[(\s]*([A-Za-z_][A-Za-z0-9_]*)/.exec(branch)?.[1]

/** Whether `name` is the name of a resource type or of an abstract resource type the catalog defines. */
const isResourceName = (reporter: Reporter, name: string): boolean =>
  /^[A-Z]/.test(name) && (reporter.registry.catalog.isResourceType(name) || name === "Resource" || name === "DomainResource")

const searchParameterByUrl = (reporter: Reporter, url: string) =>
  reporter.registry.catalog.searchParameterByUrl(url) ?? reporter.registry.catalog.searchParameterByUrl(withoutVersion(url))

/**
 * An expression read for comparison with another: its union branches that concern the given bases (a
 * branch on another resource type is left out), sorted, without spaces. Undefined when a branch is not
 * a plain path, which is then compared as written.
 */
const canonicalExpression = (reporter: Reporter, expression: string, bases: ReadonlyArray<string>): string => {
  const branches = unionBranches(expression).map((b) => b.replace(/\s+/g, ""))
  const kept: Array<string> = []
  for (const branch of branches) {
    const bare = branch.replace(/^\((.*)\)$/, "$1")
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(bare)) return expression.replace(/\s+/g, "")
    const name = leadingName(bare)!
    if (!isResourceName(reporter, name) || bases.includes(name)) kept.push(bare)
  }
  return kept.sort().join("|")
}

const searchParameter: Rule = (value, path, reporter) => {
  const code = value["code"]
  if (typeof code === "string") {
    for (const c of [".", "$", "|"]) {
      if (code.includes(c)) {
        reporter.report("warning", "invalid", `${path}.code`, `The search parameter code '${code}' contains '${c}', which has a meaning of its own in a search url`)
      }
    }
  }
  const bases = list(value["base"]).filter((b): b is string => typeof b === "string")
  const expression = text(value["expression"])
  // A branch of the expression on a resource type that no base is: the expression cannot apply to it.
  if (expression !== undefined && bases.length > 0 && !bases.includes("Resource") && !bases.includes("DomainResource")) {
    for (const branch of unionBranches(expression)) {
      const name = leadingName(branch)
      if (name === undefined || !isResourceName(reporter, name) || name === "Resource" || name === "DomainResource") continue
      if (!bases.includes(name)) {
        reporter.report("error", "invalid", `${path}.expression`, `Error in search expression '${expression}': the resource type '${name}' is not one of the bases of the search parameter (${bases.join(", ")})`)
        break
      }
    }
  }
  const derivedFrom = text(value["derivedFrom"])
  if (derivedFrom !== undefined) {
    const master = searchParameterByUrl(reporter, derivedFrom)
    if (master === undefined) {
      reporter.report("warning", "business-rule", `${path}.derivedFrom`, `The search parameter ${derivedFrom} this one is derived from is unknown, so the derivation cannot be checked`)
    } else {
      if (!master.base.includes("Resource")) {
        bases.forEach((base, i) => {
          if (!master.base.includes(base)) {
            reporter.report("error", "business-rule", path, `The resource type ${base} (base[${i}]) is not a base of the search parameter this one is derived from (${derivedFrom})`)
          }
        })
      }
      const type = value["type"]
      if (typeof type === "string" && type !== master.type) {
        reporter.report("error", "business-rule", path, `The type ${type} differs from the type ${master.type} of the search parameter this one is derived from (${derivedFrom})`)
      }
      if (expression !== undefined && master.expression !== undefined && master.expression !== expression &&
        canonicalExpression(reporter, expression, bases) !== canonicalExpression(reporter, master.expression, bases)) {
        reporter.report("warning", "business-rule", `${path}.expression`, `The expression '${expression}' does not match the expression '${master.expression}' of the search parameter this one is derived from (${derivedFrom}); the derivation is likely not valid`)
      }
    }
  }
  if (value["type"] === "composite" && list(value["component"]).length < 2) {
    reporter.report("error", "business-rule", path, "A search parameter of type 'composite' defines two or more components")
  }
}

const capabilityStatement: Rule = (value, path, reporter) => {
  list(value["rest"]).forEach((rest, r) => {
    if (!isObject(rest)) return
    list(rest["resource"]).forEach((resource, i) => {
      if (!isObject(resource)) return
      list(resource["searchParam"]).forEach((param, j) => {
        if (!isObject(param)) return
        const definition = text(param["definition"])
        if (definition === undefined) return
        const known = searchParameterByUrl(reporter, definition)
        if (known === undefined || known.type === param["type"]) return
        reporter.report("error", "invalid", `${path}.rest[${r}].resource[${i}].searchParam[${j}]`,
          `Type mismatch: the search parameter ${definition} has the type ${known.type}, but the type here is ${String(param["type"] ?? "(none)")}`)
      })
    })
  })
}

const standardsStatus = "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status"
const workGroup = "http://hl7.org/fhir/StructureDefinition/structuredefinition-wg"
const maturity = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fmm"

const hasExtension = (value: Json, url: string): boolean =>
  list(value["extension"]).some((e) => isObject(e) && e["url"] === url)

/** An npm package id as FHIR packages name them: `hl7.fhir.us.core` (https://confluence.hl7.org/display/FHIR/NPM+Package+Specification). */
const packageId = /^[a-zA-Z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+$/
const packageVersion = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/

const implementationGuide: Rule = (value, path, reporter) => {
  if (list(value["fhirVersion"]).length === 0) {
    reporter.report("warning", "business-rule", path, "The guide states no FHIR version, so the versions of its dependencies cannot be checked")
  }
  list(value["dependsOn"]).forEach((dependency, i) => {
    if (!isObject(dependency)) return
    const at = `${path}.dependsOn[${i}]`
    const uri = text(dependency["uri"])
    const version = text(dependency["version"])
    if (uri !== undefined && uri.includes("|")) {
      const stated = uri.slice(uri.indexOf("|") + 1)
      if (stated === "") reporter.report("error", "business-rule", at, "The canonical url of a dependency cannot end with '|'")
      else if (version === undefined) {
        reporter.report("error", "business-rule", at, `The canonical url names the version '${stated}' and the dependency states none: a version goes in dependsOn.version`)
      } else if (stated !== version && !uri.includes("/ImplementationGuide/")) {
        reporter.report("error", "business-rule", at, `The canonical url names the version '${stated}' and the dependency the version '${version}': they must be the same`)
      }
    }
    if (uri !== undefined && !uri.includes("/ImplementationGuide/")) {
      reporter.report("error", "business-rule", at, `The url ${uri} of a dependency should name the ImplementationGuide resource itself (it includes '/ImplementationGuide/')`)
    }
    const id = dependency["packageId"]
    if (typeof id === "string" && !packageId.test(id)) {
      reporter.report("error", "business-rule", `${at}.packageId`, `The package id ${id} is not a valid package id`)
    } else if (typeof id === "string" && version !== undefined && !packageVersion.test(version)) {
      reporter.report("error", "business-rule", `${at}.version`, `The version ${version} is not a valid package version`)
    }
  })
  const url = value["url"]
  if (typeof url === "string" && url.startsWith("http://hl7.org/fhir/")) {
    if (!hasExtension(value, standardsStatus)) {
      reporter.report("error", "business-rule", path, `A guide HL7 publishes states its standards status with the extension ${standardsStatus}`)
    }
    if (!hasExtension(value, workGroup)) {
      reporter.report("error", "business-rule", path, `A guide HL7 publishes states its owning work group with the extension ${workGroup}`)
    }
    if (!hasExtension(value, maturity)) {
      reporter.report("warning", "business-rule", path, `A guide HL7 publishes should state its maturity with the extension ${maturity}`)
    }
  }
}


/**
 * What constraints a type can carry: a binding, a length, a range (minValue, maxValue), target profiles
 * (https://hl7.org/fhir/R4/elementdefinition.html). Types not listed carry none of them.
 */
const characteristics: ReadonlyMap<string, ReadonlySet<string>> = new Map(Object.entries({
  boolean: [], integer: ["range", "length"], decimal: ["range", "length"], base64Binary: [], instant: ["range", "length"],
  string: ["length", "bind"], uri: ["length", "bind"], date: ["range", "length"], dateTime: ["range", "length"],
  time: ["range", "length"], canonical: ["target", "length"], code: ["length", "bind"], id: ["length"],
  markdown: ["length"], oid: ["length", "bind"], positiveInt: ["range", "length"], unsignedInt: ["range", "length"],
  url: ["length", "bind"], uuid: ["length", "bind"], xhtml: [], Address: [], Age: ["range", "bind"], Annotation: [],
  Attachment: [], CodeableConcept: ["bind"], Coding: ["bind"], ContactPoint: [], Count: ["range"],
  Distance: ["range", "bind"], Duration: ["range", "bind"], HumanName: [], Identifier: [], Money: ["range"], Period: [],
  Quantity: ["range", "bind"], Range: ["bind"], Ratio: [], Reference: ["target"], SampledData: [], Signature: [],
  Timing: [], ContactDetail: [], Contributor: [], DataRequirement: [], Expression: [], ParameterDefinition: [],
  RelatedArtifact: [], TriggerDefinition: [], UsageContext: [], Dosage: [], Meta: [], Resource: [], Extension: ["bind"],
  Narrative: [], MoneyQuantity: ["range", "bind"], SimpleQuantity: ["range", "bind"], MarketingStatus: [],
  ElementDefinition: [], BackboneElement: []
}).map(([type, list]) => [type, new Set(list)]))

/** A binding, length or range on an element none of whose types can carry it. */
const characteristicsProblem = (reporter: Reporter, element: Json, at: string): void => {
  const path = String(element["path"])
  const codes = list(element["type"]).flatMap((t) => (isObject(t) && typeof t["code"] === "string" ? [t["code"]] : []))
  if (!path.includes(".")) codes.push(path)
  if (codes.length === 0 || !codes.every((code) => characteristics.has(code))) return
  const has = (c: string) => codes.some((code) => characteristics.get(code)!.has(c))
  const wrong = (what: string, where: string) =>
    reporter.report("error", "business-rule", `${at}.${where}`, `The element has a ${what}, but its types (${codes.join(", ")}) cannot carry one`)
  if (element["binding"] !== undefined && !has("bind")) wrong("binding", "binding")
  if (element["maxLength"] !== undefined && !has("length")) wrong("maxLength", "maxLength")
  for (const key in element) {
    if ((key.startsWith("minValue") || key.startsWith("maxValue")) && !has("range")) wrong(key.slice(0, 8), key)
  }
}

/** The namespace of a url: all before its last `/`. */
const namespace = (url: string): string => (url.includes("/") ? url.slice(0, url.lastIndexOf("/")) : url)

/** The name element paths of a definition start with: the type, or the tail of a logical model's type url. */
const typeName = (type: string): string => (type.includes("/") ? type.slice(type.lastIndexOf("/") + 1) : type)

/** The definition a constraint profiles, following constraints down to a specialization (or undefined). */
const baseTypeOf = (reporter: Reporter, sd: StructureDefinition): StructureDefinition | undefined => {
  let current: StructureDefinition | undefined = sd
  for (let depth = 0; current !== undefined && current.derivation === "constraint" && depth < 32; depth++) {
    current = current.baseDefinition === undefined ? undefined : reporter.registry.catalog.structureDefinition(withoutVersion(current.baseDefinition))
  }
  return current
}

/**
 * Whether a definition is of the type `code`: its type or url is `code`, or an abstract (or logical)
 * definition it specializes is (a Patient profile is a Resource, a Count is not a Quantity).
 */
const isInstanceOf = (reporter: Reporter, sd: StructureDefinition, code: string): boolean => {
  let current: StructureDefinition | undefined = sd
  for (let depth = 0; current !== undefined && depth < 32; depth++) {
    if (current.type === code || current.url === code) return true
    current = current.baseDefinition === undefined ? undefined : reporter.registry.catalog.structureDefinition(withoutVersion(current.baseDefinition))
    if (current !== undefined && !current.abstract && current.kind !== "logical") return false
  }
  return false
}

const elementTypes = (reporter: Reporter, element: Json, at: string, logical: boolean): void => {
  const elementPath = String(element["path"])
  list(element["type"]).forEach((type, t) => {
    if (!isObject(type) || typeof type["code"] !== "string") return
    const code = type["code"]
    list(type["profile"]).forEach((profile, p) => {
      if (typeof profile !== "string") return
      const sd = reporter.registry.catalog.structureDefinition(withoutVersion(profile))
      if (sd === undefined) {
        reporter.report("warning", "not-found", `${at}.type[${t}].profile[${p}]`, `The profile ${profile} is unknown to this server`)
        return
      }
      const base = baseTypeOf(reporter, sd)
      if (base === undefined) return
      if (!isInstanceOf(reporter, base, code)) {
        reporter.report("error", "invalid", `${at}.type[${t}].profile[${p}]`, `The profile ${profile} is for the type ${base.type}, but the element ${elementPath} has the type ${code}`)
      } else if (base.type === "Extension") {
        const modifier = isObject(sd.resource) && list(isObject(sd.resource["snapshot"]) ? sd.resource["snapshot"]["element"] : undefined)
          .some((e) => isObject(e) && e["path"] === "Extension" && e["isModifier"] === true)
        const modifierContext = elementPath.endsWith(".modifierExtension")
        if (modifier && !modifierContext) {
          reporter.report("error", "invalid", `${at}.type[${t}].profile[${p}]`, `The profile ${profile} is for a modifier extension, but the element ${elementPath} is not a modifierExtension`)
        } else if (!modifier && modifierContext && sd.derivation === "constraint") {
          reporter.report("error", "invalid", `${at}.type[${t}].profile[${p}]`, `The profile ${profile} is not for a modifier extension, but the element ${elementPath} is a modifierExtension`)
        }
      }
    })
    list(type["targetProfile"]).forEach((profile, p) => {
      if (typeof profile !== "string") return
      const where = `${at}.type[${t}].targetProfile[${p}]`
      if (code !== "Reference" && code !== "canonical" && code !== "CodeableReference") {
        reporter.report("error", "invalid", where, `The type ${code} does not allow target profiles`)
        return
      }
      const sd = reporter.registry.catalog.structureDefinition(withoutVersion(profile))
      if (sd === undefined) {
        reporter.report("warning", "not-found", where, `The profile ${profile} is unknown to this server`)
        return
      }
      const base = baseTypeOf(reporter, sd)
      if (base === undefined) return
      if (code === "Reference") {
        if (sd.kind !== "resource" && !(logical && (base.kind === "logical" || base.kind === "resource"))) {
          reporter.report("error", "invalid", where, `The profile ${profile} is for the type ${base.type}, which is not a resource (the element ${elementPath} has the type ${code})`)
        }
      } else if (code === "canonical" && !canonicalResourceTypes.has(base.type) && base.type !== "Resource") {
        reporter.report("error", "invalid", where, `The profile ${profile} is for the type ${base.type}, which is not a canonical resource (the element ${elementPath} has the type ${code})`)
      }
    })
  })
}


/** The snapshot elements of a definition, by path (the first of each path: the element, not a slice). */
const snapshotPaths = new WeakMap<StructureDefinition, ReadonlyMap<string, ElementDefinition>>()
const byPath = (sd: StructureDefinition): ReadonlyMap<string, ElementDefinition> => {
  let map = snapshotPaths.get(sd)
  if (map === undefined) {
    const built = new Map<string, ElementDefinition>()
    for (const element of sd.snapshot?.element ?? []) if (!built.has(element.path)) built.set(element.path, element)
    map = built
    snapshotPaths.set(sd, map)
  }
  return map
}

const upperFirst = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

/**
 * Whether a differential path names an element of the base definition: an element of its snapshot, a
 * choice element by one of its types (`Observation.valueQuantity`), or an element inside the type of an
 * element (`Observation.code.coding.system`) or inside the element a content reference names. Undefined
 * when it does; otherwise the part of the path that is not found.
 */
const pathProblem = (reporter: Reporter, base: StructureDefinition, path: string): string | undefined => {
  const segments = path.split(".")
  let sd: StructureDefinition = base
  let prefix = segments[0]!
  if (!byPath(sd).has(prefix)) return undefined
  for (let i = 1; i < segments.length; i++) {
    const name = segments[i]!
    for (let hop = 0; ; hop++) {
      if (hop > 8) return undefined
      const elements = byPath(sd)
      if (elements.has(`${prefix}.${name}`)) {
        prefix = `${prefix}.${name}`
        break
      }
      const choice = [...elements.keys()].find((p) => p.startsWith(`${prefix}.`) && p.endsWith("[x]") && !p.slice(prefix.length + 1).includes(".") && name.startsWith(p.slice(prefix.length + 1, -3)))
      if (choice !== undefined) {
        const typeName = name.slice(choice.length - prefix.length - 4)
        const types = elements.get(choice)!.type.map((t) => t.code)
        const chosen = types.find((t) => upperFirst(t) === typeName)
        if (chosen === undefined) return `${prefix}.${name} (the types of ${choice} are ${types.join(", ")})`
        if (i === segments.length - 1) return undefined
        const typeSd = reporter.registry.catalog.structureDefinitionForType(chosen)
        if (typeSd?.snapshot === undefined) return undefined
        sd = typeSd
        prefix = typeSd.type
        break
      }
      const current = elements.get(prefix)
      if (current === undefined) return undefined
      if (current.contentReference !== undefined) {
        const target = current.contentReference.slice(current.contentReference.indexOf("#") + 1)
        if (!elements.has(target)) return undefined
        prefix = target
        continue
      }
      if (current.type.length !== 1) return current.type.length === 0 ? `${prefix}.${name}` : undefined
      const code = current.type[0]!.code
      if (code === "BackboneElement" || code === "Element" && prefix.includes(".")) return `${prefix}.${name}`
      const typeSd = reporter.registry.catalog.structureDefinitionForType(code)
      if (typeSd?.snapshot === undefined || typeSd === sd && prefix === typeSd.type) return undefined
      sd = typeSd
      prefix = typeSd.type
    }
  }
  return undefined
}

/** The FHIR type an ElementDefinition.type names with the structuredefinition-fhir-type extension (for a System type). */
const fhirType = (type: Json): string | undefined => {
  for (const extension of list(type["extension"])) {
    if (isObject(extension) && extension["url"] === "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type") {
      const value = extension["valueUrl"] ?? extension["valueUri"] ?? extension["valueString"]
      if (typeof value === "string") return value
    }
  }
  return undefined
}

/** The key and value of an element's fixed[x] or pattern[x]. */
const choiceValue = (element: Json, prefix: "fixed" | "pattern" | "defaultValue"): { readonly type: string; readonly value: unknown } | undefined => {
  for (const key in element) {
    if (key.startsWith(prefix) && key.length > prefix.length && /^[A-Z]/.test(key.slice(prefix.length))) return { type: key.slice(prefix.length), value: element[key] }
  }
  return undefined
}

/** The base's element for a differential element, by id, else by path: from its snapshot, or its differential when it has none. */
const baseElement = (base: StructureDefinition, element: Json): Json | undefined => {
  const id = element["id"]
  const holder = isObject(base.resource) ? base.resource[base.snapshot === undefined ? "differential" : "snapshot"] : undefined
  const elements = list(isObject(holder) ? holder["element"] : undefined).filter(isObject)
  return (typeof id === "string" ? elements.find((e) => e["id"] === id) : undefined) ?? elements.find((e) => e["path"] === element["path"])
}

/** A differential's fixed value where the base fixes one: the same type and the same value. */
const fixedAgainstBase = (reporter: Reporter, base: StructureDefinition, element: Json, at: string): void => {
  const fixed = choiceValue(element, "fixed")
  if (fixed === undefined) return
  const inBase = baseElement(base, element)
  if (inBase === undefined) return
  const baseFixed = choiceValue(inBase, "fixed")
  if (baseFixed === undefined) return
  if (fixed.type !== baseFixed.type) {
    reporter.report("error", "invalid", `${at}.fixed${fixed.type}`, `The base element fixes a value of type ${baseFixed.type}, so this element's fixed value is of that type, not ${fixed.type}`)
  } else if (!equalsFixed(fixed.value, baseFixed.value)) {
    reporter.report("error", "invalid", `${at}.fixed${fixed.type}`, `The fixed value ${JSON.stringify(fixed.value)} differs from the value ${JSON.stringify(baseFixed.value)} the base definition ${base.url} fixes`)
  }
}

const structureDefinition: Rule = (value, path, reporter) => {
  const catalog = reporter.registry.catalog
  const url = text(value["url"])
  const type = text(value["type"])
  const kind = text(value["kind"])
  const derivation = text(value["derivation"])
  const baseUrl = text(value["baseDefinition"])
  // The type: a FHIR type (which only its own definition specializes), or a logical model's namespaced url.
  if (type !== undefined && url !== undefined) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(type)) {
      if (derivation !== "constraint" && namespace(type) !== namespace(url) && namespace(type) !== namespace(url).replace("StructureDefinition/", "").replace(/\/$/, "")) {
        reporter.report("warning", "invalid", `${path}.type`, `The namespace of the type ${type} should be that of the definition's url ${url}`)
      }
      if (kind !== "logical") reporter.report("error", "invalid", `${path}.type`, `The type ${type} can only be defined by a logical model, not by a definition of kind ${kind ?? "(none)"}`)
    } else {
      const known = catalog.structureDefinitionForType(type) !== undefined || catalog.structureDefinition(`http://hl7.org/fhir/StructureDefinition/${type}`) !== undefined
      if (!known) {
        reporter.report("error", "invalid", `${path}.type`, `The type ${type} is not defined by FHIR: a type defined elsewhere is named by an absolute url`)
      } else if (url !== `http://hl7.org/fhir/StructureDefinition/${type}` && derivation !== "constraint") {
        reporter.report("error", "invalid", `${path}.type`, `The type ${type} can only be used by a definition that constrains it`)
      }
    }
  }
  const base = baseUrl === undefined ? undefined : catalog.structureDefinition(withoutVersion(baseUrl))
  if (baseUrl !== undefined && base === undefined) {
    reporter.report("warning", "not-found", `${path}.baseDefinition`, `The base definition ${baseUrl} is unknown to this server, so the differential cannot be checked against it`)
  }
  if (base !== undefined && url !== undefined) {
    // A base that leads back to this definition.
    let current: StructureDefinition | undefined = base
    for (let depth = 0; current !== undefined && depth < 32; depth++) {
      if (current.url === url) {
        reporter.report("error", "invalid", `${path}.baseDefinition`, `The definition is circular: ${url} is its own base`)
        break
      }
      current = current.baseDefinition === undefined ? undefined : catalog.structureDefinition(withoutVersion(current.baseDefinition))
    }
  }
  if (base !== undefined) {
    if (derivation === undefined) {
      reporter.report("error", "required", path, `The StructureDefinition ${url ?? ""} has a baseDefinition, so it states its derivation`)
    } else {
      if ((!base.abstract || derivation === "constraint") && kind !== base.kind) {
        reporter.report("error", "invalid", `${path}.kind`, `The kind ${kind ?? "(none)"} is not the kind ${base.kind} of the base definition ${base.url} (type ${base.type})`)
      }
      if (derivation === "constraint" && type !== base.type) {
        reporter.report("error", "invalid", `${path}.type`, `The type ${type ?? "(none)"} of a constraint is the type ${base.type} of the definition it constrains`)
      }
      if (derivation === "specialization" && type === base.type) {
        reporter.report("error", "invalid", path, `The type ${type} of a specialization is not the type of the definition it specializes (${base.url})`)
      }
    }
    if (value["experimental"] !== true && isObject(base.resource) && base.resource["experimental"] === true) {
      reporter.report("warning", "business-rule", path, `The definition builds on ${base.url}, which is experimental, but is not marked experimental itself`)
    }
  }
  const name = type === undefined ? undefined : typeName(type)
  const logical = kind === "logical"
  for (const part of ["differential", "snapshot"] as const) {
    const holder = value[part]
    if (!isObject(holder)) continue
    list(holder["element"]).forEach((element, i) => {
      if (!isObject(element) || typeof element["path"] !== "string") return
      const at = `${path}.${part}.element[${i}]`
      const elementPath = element["path"]
      if (name !== undefined && elementPath !== name && !elementPath.startsWith(`${name}.`)) {
        reporter.report("error", "invalid", at, `The path ${elementPath} does not start with the name of the structure's type ${name}`)
      }
      if (part === "differential" && derivation === "constraint" && element["meaningWhenMissing"] !== undefined && elementPath !== "Extension" && !elementPath.endsWith(".extension")) {
        reporter.report("error", "invalid", `${at}.meaningWhenMissing`, `The element ${elementPath} has a meaningWhenMissing, which a profile cannot state`)
      }
      if (part === "differential" && !elementPath.includes(".") && element["slicing"] !== undefined) {
        reporter.report("error", "invalid", `${at}.slicing`, "Slicing is not allowed at the root of a profile")
      }
      elementTypes(reporter, element, at, logical)
      characteristicsProblem(reporter, element, at)
      if (part === "differential" && base !== undefined && derivation === "constraint") {
        const problem = base.snapshot === undefined ? undefined : pathProblem(reporter, base, elementPath)
        if (problem !== undefined) {
          reporter.report("error", "invalid", at, `The path ${elementPath} is not an element of the base definition ${base.url}: ${problem} is not found`)
        }
        fixedAgainstBase(reporter, base, element, at)
      }
      if (part === "snapshot" && elementPath.includes(".")) {
        const codes = list(element["type"]).flatMap((t) => (isObject(t) && typeof t["code"] === "string" ? [upperFirst(fhirType(t) ?? t["code"])] : []))
        if (codes.length === 0 && element["contentReference"] === undefined) {
          reporter.report("error", "invalid", at, `The element ${String(element["id"] ?? elementPath)} has no types and no content reference`)
        }
        // A fixed, pattern or default value is of one of the element's types.
        for (const prefix of ["fixed", "pattern", "defaultValue"] as const) {
          const found = choiceValue(element, prefix)
          if (found !== undefined && codes.length > 0 && !codes.some((code) => code.includes(":")) && !codes.includes(found.type)) {
            reporter.report("error", "invalid", `${at}.${prefix}${found.type}`, `The element ${String(element["id"] ?? elementPath)} has a ${prefix === "defaultValue" ? "default" : prefix} value of type ${found.type}, which is not one of its types (${codes.join(", ")})`)
          }
        }
      }
    })
  }
}

export const conformanceRules: ReadonlyArray<readonly [string, Rule]> = [
  ["SearchParameter", searchParameter],
  ["CapabilityStatement", capabilityStatement],
  ["ImplementationGuide", implementationGuide],
  ["StructureDefinition", structureDefinition]
]
