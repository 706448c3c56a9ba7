/**
 * More rules of StructureDefinition resources (https://hl7.org/fhir/R4/structuredefinition.html), checked
 * as the HL7 reference validator checks a definition written to the server (conformance.ts has the others):
 * - Extension contexts (https://hl7.org/fhir/R4/defining-extensions.html#context): only an extension
 *   definition states `context` or `contextInvariant`; an `element` context names an element that exists;
 *   review advice for the context `Element` and for a `fhirpath` context that is a plain element path.
 * - An extension definition fixes `Extension.url` to its own url (https://hl7.org/fhir/R4/extensibility.html).
 * - Slicing (https://hl7.org/fhir/R4/profiling.html#slicing): only on an element that repeats (or a choice);
 *   each discriminator path is FHIRPath and names something in the sliced element's types (dotted names,
 *   `$this`, `extension('url')`, `ofType(T)`, `as(T)`, `resolve()`); in a snapshot, slices of a
 *   must-support element are must-support too.
 * - Bindings (https://hl7.org/fhir/R4/elementdefinition.html#ElementDefinition.binding): on a bindable type,
 *   to a value set the server knows (an unknown one is a warning, another kind of resource an error), with
 *   review warnings for all of LOINC, SNOMED CT or CPT.
 * - A differential pattern where the base already has a pattern; fixed and pattern values of repeating
 *   elements in a snapshot; a `type.code` with extensions but no value.
 * - A type that FHIR does not define: the server cannot consult the registry of approved additional resources.
 */
import { parseProblem as parsedProblem } from "./constraints.ts"
import type { StructureDefinition } from "../catalog/definitions.ts"
import { isObject, type Json } from "../catalog/json.ts"
import type { Reporter } from "./Reporter.ts"

type Rule = (value: Json, path: string, reporter: Reporter) => void

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)
const withoutVersion = (url: string): string => (url.includes("|") ? url.slice(0, url.indexOf("|")) : url)
const upperFirst = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1)

const fhirTypeExtension = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
const jsonNameExtensions = new Set([
  "http://hl7.org/fhir/tools/StructureDefinition/json-name",
  "http://hl7.org/fhir/tools/StructureDefinition/elementdefinition-json-name"
])
const bindingStyleExtension = "http://hl7.org/fhir/tools/StructureDefinition/elementdefinition-binding-style"
const characteristicsExtension = "http://hl7.org/fhir/StructureDefinition/structuredefinition-type-characteristics"
const coreExtension = "http://hl7.org/fhir/StructureDefinition/Extension"
const additionalResources = "https://fhir.github.io/approved-resources/registry.json"

/** The type an ElementDefinition.type names: its code, or for a System type the FHIR type its extension states. */
const typeCode = (type: Json): string | undefined => {
  for (const extension of list(type["extension"])) {
    if (isObject(extension) && extension["url"] === fhirTypeExtension) {
      const value = extension["valueUrl"] ?? extension["valueUri"] ?? extension["valueString"]
      if (typeof value === "string" && value !== "") return value
    }
  }
  return text(type["code"])
}

/** The key suffix (type) and value of an element's fixed[x] or pattern[x]. */
const choiceValue = (element: Json, prefix: "fixed" | "pattern"): { readonly type: string; readonly value: unknown } | undefined => {
  for (const key in element) {
    if (key.startsWith(prefix) && key.length > prefix.length && /^[A-Z]/.test(key.slice(prefix.length))) return { type: key.slice(prefix.length), value: element[key] }
  }
  return undefined
}

/** The snapshot elements of a definition by path (the first of each path: the element, not a slice). */
const snapshotPaths = new WeakMap<StructureDefinition, ReadonlyMap<string, Json>>()
const byPath = (sd: StructureDefinition): ReadonlyMap<string, Json> => {
  let map = snapshotPaths.get(sd)
  if (map === undefined) {
    const built = new Map<string, Json>()
    for (const element of sd.snapshot?.element ?? []) if (!built.has(element.path)) built.set(element.path, element.json)
    map = built
    snapshotPaths.set(sd, map)
  }
  return map
}

/** The paths of a definition's snapshot that have children (`a.b` when `a.b.c` is there). */
const parentPaths = new WeakMap<StructureDefinition, ReadonlySet<string>>()
const hasChildren = (sd: StructureDefinition, path: string): boolean => {
  let set = parentPaths.get(sd)
  if (set === undefined) {
    const built = new Set<string>()
    for (const element of sd.snapshot?.element ?? []) {
      const dot = element.path.lastIndexOf(".")
      if (dot > 0) built.add(element.path.slice(0, dot))
    }
    set = built
    parentPaths.set(sd, set)
  }
  return set.has(path)
}

// ---------------------------------------------------------------------------------------------------------
// Discriminator paths, resolved against the types of the sliced element.

/** An element of a definition's snapshot that a path has reached. */
interface Position {
  readonly sd: StructureDefinition
  readonly path: string
}

/** Where a path has got to: the elements it may be at; `open` when it may be anywhere (after `resolve()`). */
interface Reached {
  readonly positions: ReadonlyArray<Position>
  readonly open: boolean
}

const abstractResources = new Set(["Resource", "DomainResource"])

const typeRoot = (reporter: Reporter, code: string): Position | undefined => {
  const sd = reporter.registry.catalog.structureDefinitionForType(code)
  return sd?.snapshot === undefined ? undefined : { sd, path: sd.type }
}

/** The elements a child element of a definition leads to: its own children, or the root of each of its types. */
const positionsOf = (reporter: Reporter, sd: StructureDefinition, path: string, element: Json): ReadonlyArray<Position> => {
  const reference = text(element["contentReference"])
  if (reference !== undefined) return [{ sd, path: reference.slice(reference.indexOf("#") + 1) }]
  if (hasChildren(sd, path)) return [{ sd, path }]
  return list(element["type"]).flatMap((type) => {
    const code = isObject(type) ? typeCode(type) : undefined
    const root = code === undefined ? undefined : typeRoot(reporter, code)
    return root === undefined ? [] : [root]
  })
}

/** The positions a name leads to from a position (a choice element by its name or by name and type), or undefined when the name is not there. */
const childPositions = (reporter: Reporter, at: Position, name: string): ReadonlyArray<Position> | undefined => {
  const elements = byPath(at.sd)
  const exact = elements.get(`${at.path}.${name}`)
  if (exact !== undefined) return positionsOf(reporter, at.sd, `${at.path}.${name}`, exact)
  const choice = elements.get(`${at.path}.${name}[x]`)
  if (choice !== undefined) return positionsOf(reporter, at.sd, `${at.path}.${name}[x]`, choice)
  // `valueQuantity`: a choice element by one of its types.
  for (let cut = name.length - 1; cut > 0; cut--) {
    if (!/[A-Z]/.test(name.charAt(cut))) continue
    const candidate = elements.get(`${at.path}.${name.slice(0, cut)}[x]`)
    if (candidate === undefined) continue
    const wanted = name.slice(cut)
    const type = list(candidate["type"]).map((t) => (isObject(t) ? typeCode(t) : undefined)).find((t) => t !== undefined && upperFirst(t) === wanted)
    if (type === undefined) continue
    const root = typeRoot(reporter, type)
    return root === undefined ? [] : [root]
  }
  return undefined
}

type Step = { readonly name: string } | { readonly ofType: string } | { readonly extension: true } | { readonly resolve: true } | { readonly self: true }

/** The steps of a discriminator path of the forms discriminators use, or undefined for any other FHIRPath. */
const stepsOf = (path: string): ReadonlyArray<Step> | undefined => {
  const parts: Array<string> = []
  let depth = 0
  let quoted = false
  let start = 0
  for (let i = 0; i < path.length; i++) {
    const c = path.charAt(i)
    if (c === "'" && path.charAt(i - 1) !== "\\") quoted = !quoted
    else if (quoted) continue
    else if (c === "(") depth++
    else if (c === ")") depth--
    else if (c === "." && depth === 0) {
      parts.push(path.slice(start, i).trim())
      start = i + 1
    }
  }
  parts.push(path.slice(start).trim())
  const steps: Array<Step> = []
  for (const part of parts) {
    if (part === "$this") steps.push({ self: true })
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) steps.push({ name: part })
    else if (/^`[^`]+`$/.test(part)) steps.push({ name: part.slice(1, -1) })
    else if (/^resolve\(\s*\)$/.test(part)) steps.push({ resolve: true })
    else if (/^extension\(\s*'[^']*'\s*\)$/.test(part)) steps.push({ extension: true })
    else {
      const cast = /^(?:ofType|as)\(\s*(?:FHIR\.)?([A-Za-z][A-Za-z0-9_]*)\s*\)$/.exec(part)
      if (cast === null) return undefined
      steps.push({ ofType: cast[1]! })
    }
  }
  return steps
}

/** The first line of the FHIRPath parser's message on an expression, undefined when it parses. */
const parseProblem = (expression: string): string | undefined => parsedProblem(expression)?.split("\n")[0]

/**
 * Whether a discriminator path names something of the sliced element's types: "valid", "invalid" (a name
 * none of the types has), "unknown" (a form this resolver does not follow), or the parser's message.
 */
const discriminatorOutcome = (reporter: Reporter, start: ReadonlyArray<Position>, path: string): "valid" | "invalid" | "unknown" | { readonly error: string } => {
  const problem = parseProblem(path)
  if (problem !== undefined) return { error: problem }
  const steps = stepsOf(path)
  if (steps === undefined) return "unknown"
  let reached: Reached = { positions: start, open: false }
  let first = true
  for (const step of steps) {
    if (reached.open) return "valid"
    if ("self" in step) continue
    if ("resolve" in step) {
      reached = { positions: [], open: true }
    } else if ("extension" in step) {
      const root = typeRoot(reporter, "Extension")
      if (root === undefined) return "unknown"
      reached = { positions: [root], open: false }
    } else if ("ofType" in step) {
      const root = typeRoot(reporter, step.ofType)
      if (root === undefined) return "unknown"
      reached = { positions: [root], open: false }
    } else {
      // At the start, a name may be the type itself (`Observation.code` on an Observation).
      if (first && reached.positions.some((p) => p.path === step.name)) {
        first = false
        continue
      }
      const next: Array<Position> = []
      let found = false
      for (const position of reached.positions) {
        const children = childPositions(reporter, position, step.name)
        if (children !== undefined) {
          found = true
          next.push(...children)
        } else if (abstractResources.has(position.path)) {
          // A name on any resource: the resource type is not known here.
          return "unknown"
        }
      }
      if (!found) return "invalid"
      reached = { positions: next, open: false }
      if (next.length === 0) return "unknown"
    }
    first = false
  }
  return "valid"
}

/** The elements the sliced element's types start a discriminator path at, like the reference validator's type list. */
const slicedTypes = (reporter: Reporter, typeSd: StructureDefinition, element: Json, elementPath: string): ReadonlyArray<Position> => {
  if (!elementPath.includes(".")) return [{ sd: typeSd, path: typeSd.type }]
  return list(element["type"]).flatMap((type) => {
    const code = isObject(type) ? typeCode(type) : undefined
    if (code === undefined) return []
    // An abstract type (BackboneElement, Element) with children here: its children are the element's.
    if ((code === "BackboneElement" || code === "Element") && hasChildren(typeSd, elementPath)) return [{ sd: typeSd, path: elementPath }]
    const root = typeRoot(reporter, code)
    return root === undefined ? [] : [root]
  })
}

const slicing = (reporter: Reporter, element: Json, elementPath: string, at: string): void => {
  const slicingValue = element["slicing"]
  if (!isObject(slicingValue)) return
  const typeName = elementPath.includes(".") ? elementPath.slice(0, elementPath.indexOf(".")) : elementPath
  const typeSd = reporter.registry.catalog.structureDefinitionForType(typeName)
  if (typeSd?.snapshot === undefined) return
  const base = byPath(typeSd).get(elementPath)
  if (base === undefined) return
  if (base["max"] === "1" && !elementPath.includes("[x]")) {
    reporter.report("error", "not-found", `${at}.slicing`, `Slicing is not allowed at '${elementPath}': the element does not repeat`)
  }
  const start = slicedTypes(reporter, typeSd, element, elementPath)
  if (start.length === 0) return
  list(slicingValue["discriminator"]).forEach((discriminator, j) => {
    if (!isObject(discriminator)) return
    const path = text(discriminator["path"])
    if (path === undefined) return
    const where = `${at}.slicing.discriminator[${j}]`
    const outcome = discriminatorOutcome(reporter, start, path)
    if (outcome === "invalid") {
      reporter.report("error", "invalid", where, `The discriminator path '${path}' does not appear to be valid for the element that is being sliced '${elementPath}'`)
    } else if (typeof outcome === "object") {
      reporter.report("error", "invalid", where, `The discriminator path '${path}' does not appear to be valid for the element that is being sliced '${elementPath}': ${outcome.error}`)
    }
  })
}

// ---------------------------------------------------------------------------------------------------------
// Bindings.

const directlyBound = new Set(["code", "Coding", "CodeableConcept", "Quantity", "CodeableReference"])
const bindableBases = new Set(["string", "uri", "CodeableConcept", "Quantity", "CodeableReference"])
const listedBindable = new Set(["code", "string", "url", "uri", "Coding", "CodeableConcept", "Quantity", "CodeableReference"])

/** Whether a type can carry a binding: a coded type, or one derived from string, uri or Quantity, or one that says so. */
const bindable = (reporter: Reporter, code: string): boolean => {
  if (directlyBound.has(code) || bindableBases.has(code)) return true
  let sd = reporter.registry.catalog.structureDefinitionForType(code)
  for (let depth = 0; sd !== undefined && depth < 16; depth++) {
    const extensions = list(isObject(sd.resource) ? sd.resource["extension"] : undefined).filter(isObject)
    if (extensions.some((e) => e["url"] === bindingStyleExtension || (e["url"] === characteristicsExtension && e["valueCode"] === "can-bind"))) return true
    if (bindableBases.has(sd.type)) return true
    sd = sd.baseDefinition === undefined ? undefined : reporter.registry.catalog.structureDefinition(withoutVersion(sd.baseDefinition))
  }
  return false
}

/** Value sets a terminology service knows without a resource: SNOMED CT and LOINC implicit value sets. */
const implicitValueSet = (url: string): boolean =>
  url.includes("?fhir_vs") || url.startsWith("http://loinc.org/vs")

const reviewed: ReadonlyArray<readonly [string, string]> = [
  ["http://loinc.org/vs", "This binding is to ALL LOINC codes, which includes part codes and answer list codes. The value set choice should be reviewed"],
  ["http://snomed.info/sct?fhir_vs", "This binding is to ALL SNOMED CT codes, which includes qualifiers etc. The value set choice should be reviewed"],
  ["http://hl7.org/fhir/ValueSet/cpt-all", "This binding is to ALL CPT codes, which includes modifiers and internal metadata codes. The value set choice should be reviewed"]
]

const binding = (reporter: Reporter, element: Json, elementPath: string, codes: ReadonlyArray<string>, snapshot: boolean, at: string): void => {
  const bindingValue = element["binding"]
  if (!isObject(bindingValue)) return
  const where = `${at}.binding`
  const shown = `[${codes.join(", ")}]`
  if (snapshot && !codes.some((code) => bindable(reporter, code))) {
    reporter.report("error", "business-rule", where, `The element ${elementPath} has a binding, but no bindable types are present ${shown}`)
  }
  if (!snapshot && codes.filter((code) => listedBindable.has(code)).length > 1) {
    reporter.report("information", "business-rule", where, `The element ${elementPath} has a binding, and has multiple types subject to bindings (${shown}). The binding will apply to all the types`)
  }
  const ref = text(bindingValue["valueSet"])
  if (ref === undefined) return
  const url = withoutVersion(ref)
  const catalog = reporter.registry.catalog
  if (catalog.valueSet(url) === undefined && !implicitValueSet(url)) {
    const other = catalog.codeSystem(url) !== undefined ? "CodeSystem" : catalog.structureDefinition(url) !== undefined ? "StructureDefinition" : undefined
    if (other !== undefined) {
      reporter.report("error", "business-rule", `${where}.valueSet`, `The valueSet reference ${ref} on element ${elementPath} points to something that is not a value set (${other})`)
    } else {
      reporter.report("warning", "business-rule", `${where}.valueSet`, `The valueSet reference ${ref} on element ${elementPath} could not be resolved`)
    }
  }
  for (const [all, message] of reviewed) {
    if (ref === all) reporter.report("warning", "business-rule", `${where}.valueSet`, message)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Extension contexts.

/** Whether an element path (`Observation.component.code`, `url#Extension.value[x]`) names an element, walking into types as the reference validator does. */
const contextElementFound = (reporter: Reporter, expression: string): boolean => {
  const catalog = reporter.registry.catalog
  const hash = expression.indexOf("#")
  let local = hash >= 0 ? expression.slice(hash + 1) : expression
  let segments = local.split(".")
  const url = hash >= 0 ? expression.slice(0, hash) : `http://hl7.org/fhir/StructureDefinition/${segments[0]}`
  let sd = catalog.structureDefinition(url)
  // R4 has no CanonicalResource or MetadataResource: a resource that has their elements stands in.
  if (sd === undefined && (url.endsWith("/CanonicalResource") || url.endsWith("/MetadataResource"))) {
    const standIn = url.endsWith("/CanonicalResource") ? "CodeSystem" : "PlanDefinition"
    sd = catalog.structureDefinition(`http://hl7.org/fhir/StructureDefinition/${standIn}`)
    local = local.replace(/^(CanonicalResource|MetadataResource)/, standIn)
    segments = local.split(".")
  }
  if (sd === undefined) return false
  if (sd.snapshot === undefined) return true
  let position: Position = { sd, path: sd.snapshot.element[0]?.path ?? sd.type }
  for (let i = 1; i < segments.length; i++) {
    const name = segments[i]!
    const elements = byPath(position.sd)
    const child = elements.has(`${position.path}.${name}`) ? `${position.path}.${name}` : elements.has(`${position.path}.${name}[x]`) ? `${position.path}.${name}[x]` : undefined
    if (child === undefined) return false
    if (i === segments.length - 1) return true
    const element = elements.get(child)!
    const reference = text(element["contentReference"])
    if (reference !== undefined) {
      position = { sd: position.sd, path: reference.slice(reference.indexOf("#") + 1) }
      continue
    }
    if (hasChildren(position.sd, child)) {
      position = { sd: position.sd, path: child }
      continue
    }
    // No children here: follow the element's one type (or its one profile).
    const types = list(element["type"]).filter(isObject)
    if (types.length !== 1) return false
    const profiles = list(types[0]!["profile"]).filter((p): p is string => typeof p === "string")
    if (profiles.length > 1) return false
    const code = typeCode(types[0]!)
    const next = profiles.length === 1 ? catalog.structureDefinition(withoutVersion(profiles[0]!)) : code === undefined ? undefined : catalog.structureDefinitionForType(code)
    if (next?.snapshot === undefined) return true
    position = { sd: next, path: next.snapshot.element[0]?.path ?? next.type }
  }
  return true
}

/** Whether an expression is just the path of an element of a FHIR type. */
const isElementPath = (reporter: Reporter, expression: string): boolean => {
  const typeName = expression.includes(".") ? expression.slice(0, expression.indexOf(".")) : expression
  const sd = reporter.registry.catalog.structureDefinitionForType(typeName)
  return sd !== undefined && byPath(sd).has(expression)
}

const rootHasJsonName = (value: Json): boolean => {
  for (const part of ["snapshot", "differential"] as const) {
    const holder = value[part]
    const first = isObject(holder) ? list(holder["element"])[0] : undefined
    if (isObject(first)) return list(first["extension"]).some((e) => isObject(e) && jsonNameExtensions.has(String(e["url"])))
  }
  return false
}

const contexts = (reporter: Reporter, value: Json, path: string, type: string | undefined): void => {
  const id = text(value["id"]) ?? ""
  list(value["context"]).forEach((context, i) => {
    if (!isObject(context)) return
    const at = `${path}.context[${i}]`
    if (type !== "Extension") {
      if (!rootHasJsonName(value)) reporter.report("error", "invalid", at, `The type is ${type ?? "(none)"}, so the definition states no context: only an extension definition has one`)
      return
    }
    const contextType = text(context["type"])
    const expression = text(context["expression"])
    if (expression === undefined) return
    if (contextType === "element") {
      if (!contextElementFound(reporter, expression)) reporter.report("error", "invalid", at, `The element ${expression} is not valid`)
      if (expression === "Element") {
        reporter.report("warning", "business-rule", at, `Review the extension type for ${id}: extensions should not have a context of ${expression} unless it's really intended that they can be used anywhere`)
      }
    } else if (contextType === "fhirpath" && isElementPath(reporter, expression)) {
      reporter.report("warning", "business-rule", at, `Review the extension type for ${id}: the context of ${expression} appears to be a simple element, so the context type should be 'element' not 'fhirpath'`)
    }
  })
  if (type !== "Extension") {
    list(value["contextInvariant"]).forEach((_, i) => {
      reporter.report("error", "invalid", `${path}.contextInvariant[${i}]`, `The type is ${type ?? "(none)"}, so the definition states no contextInvariant: only an extension definition has one`)
    })
  }
}

// ---------------------------------------------------------------------------------------------------------

/** The base's snapshot element whose id is a differential element's path (as the reference validator looks it up). */
const baseElement = (base: StructureDefinition, element: Json): Json | undefined => {
  const path = element["path"]
  return base.snapshot?.element.find((e) => e.id === path)?.json
}

/** Whether the type a fixed[x] or pattern[x] key ends with (`Uri`, `CodeableConcept`) is a primitive type. */
const isPrimitive = (reporter: Reporter, type: string): boolean =>
  reporter.registry.catalog.structureDefinitionForType(type.charAt(0).toLowerCase() + type.slice(1))?.kind === "primitive-type"

/** Advice on fixed and pattern values of a snapshot element: they apply to every repeat; a complex fixed value over-constrains. */
const snapshotValues = (reporter: Reporter, element: Json, at: string): void => {
  const id = text(element["id"]) ?? text(element["path"]) ?? ""
  const repeating = element["max"] !== "0" && element["max"] !== "1"
  for (const prefix of ["fixed", "pattern"] as const) {
    const found = choiceValue(element, prefix)
    if (found === undefined) continue
    const where = `${at}.${prefix}${found.type}`
    if (repeating) {
      reporter.report("information", "business-rule", where, `The repeating element has a ${prefix} value. The ${prefix} value will apply to all the repeats (this has not been clear to all users)`)
    }
    if (isPrimitive(reporter, found.type)) {
      if (repeating) reporter.report("warning", "business-rule", where, `The repeating element ${id} has a ${prefix} value for a primitive type. The DotNet validator will not apply this to all the repeats - this is an error`)
    } else if (prefix === "fixed") {
      reporter.report("warning", "business-rule", where, `For the complex type ${found.type}, consider using a pattern rather than a fixed value to avoid over-constraining the instance`)
    }
  }
}

/** In a snapshot, the slices of a must-support sliced element are must-support, and of the element's types. */
const sliceConsistency = (reporter: Reporter, elements: ReadonlyArray<unknown>, path: string): void => {
  elements.forEach((element, i) => {
    if (!isObject(element) || !isObject(element["slicing"]) || element["mustSupport"] !== true) return
    const slicedPath = text(element["path"])
    if (slicedPath === undefined) return
    const types = new Set(list(element["type"]).flatMap((t) => (isObject(t) ? [typeCode(t) ?? ""] : [])))
    for (let k = i + 1; k < elements.length; k++) {
      const slice = elements[k]
      if (!isObject(slice)) continue
      const slicePath = text(slice["path"]) ?? ""
      if (slicePath.length < slicedPath.length) break
      if (slicePath !== slicedPath || slice["mustSupport"] === true) continue
      const name = text(slice["sliceName"]) ?? ""
      const at = `${path}.snapshot.element[${k}]`
      reporter.report("warning", "invalid", at, `The slice '${name}' on path '${slicedPath}' is not marked as 'must-support' which is not consistent with the element that defines the slicing, where 'must-support' is true`)
      for (const type of list(slice["type"])) {
        const code = isObject(type) ? typeCode(type) : undefined
        if (code !== undefined && !types.has(code)) {
          reporter.report("warning", "invalid", at, `The slice '${name}' on path '${slicedPath}' has type '${code}' which is not consistent with the element that defines the slicing, which has the type(s) '${[...types].join(", ")}'`)
        }
      }
    }
  })
}

const structureDefinitionChecks: Rule = (value, path, reporter) => {
  const catalog = reporter.registry.catalog
  const url = text(value["url"])
  const type = text(value["type"])
  contexts(reporter, value, path, type)
  if (type !== undefined && !/^[a-z][a-z0-9+.-]*:/i.test(type)
    && catalog.structureDefinitionForType(type) === undefined && catalog.structureDefinition(`http://hl7.org/fhir/StructureDefinition/${type}`) === undefined) {
    reporter.report("warning", "invalid", `${path}.type`, `Unable to read the list of approved additional resources from ${additionalResources}, so unable to check whether unknown resource types are approved additional resources - some of the type errors reported may be incorrect`)
  }
  const baseUrl = text(value["baseDefinition"])
  const base = baseUrl === undefined ? undefined : catalog.structureDefinition(withoutVersion(baseUrl))
  // Like the reference validator, the elements are checked only against a base the server knows.
  if (base === undefined) return
  // An extension definition fixes Extension.url to its own url.
  if (type === "Extension" && baseUrl === coreExtension && url !== undefined) {
    const differential = value["differential"]
    const urlElement = list(isObject(differential) ? differential["element"] : undefined).find((e) => isObject(e) && e["path"] === "Extension.url")
    const fixed = isObject(urlElement) ? choiceValue(urlElement, "fixed")?.value : undefined
    if (typeof fixed !== "string") {
      reporter.report("error", "invalid", path, `The value of Extension.url is not fixed to the extension URL ${url}`)
    } else if (fixed !== url) {
      reporter.report("error", "invalid", path, `The fixed value for the extension URL is ${fixed} which doesn't match the canonical URL ${url}`)
    }
  }
  const id = text(value["id"]) ?? url ?? ""
  for (const part of ["differential", "snapshot"] as const) {
    const holder = value[part]
    if (!isObject(holder)) continue
    const snapshot = part === "snapshot"
    const elements = list(holder["element"])
    elements.forEach((element, i) => {
      if (!isObject(element) || typeof element["path"] !== "string") return
      const at = `${path}.${part}.element[${i}]`
      const elementPath = element["path"]
      slicing(reporter, element, elementPath, at)
      // A differential pattern where the base element has a pattern (the reference validator asks for a fixed value).
      if (!snapshot) {
        const pattern = choiceValue(element, "pattern")
        const inBase = pattern === undefined ? undefined : baseElement(base, element)
        if (pattern !== undefined && inBase !== undefined && choiceValue(inBase, "fixed") === undefined) {
          const basePattern = choiceValue(inBase, "pattern")
          if (basePattern !== undefined) {
            reporter.report("error", "invalid", `${at}.pattern${pattern.type}`, `The base element has a pattern type of '${pattern.type}', so this element must have a fixed value but it doesn't`)
          }
        }
      }
      const codes: Array<string> = elementPath.includes(".") ? [] : [elementPath]
      list(element["type"]).forEach((t) => {
        if (!isObject(t)) return
        const code = typeCode(t)
        if (code !== undefined) codes.push(code)
        else if (t["_code"] !== undefined) {
          reporter.report("error", "invalid", at, `Snapshot for ${id} element ${elementPath} has type.code without a value`)
        }
      })
      binding(reporter, element, elementPath, codes, snapshot, at)
      const elementId = text(element["id"])
      if (snapshot && elementId !== undefined && elementId.includes(".") && (codes.length > 0 || element["contentReference"] !== undefined)) {
        snapshotValues(reporter, element, at)
      }
    })
    if (snapshot) sliceConsistency(reporter, elements, path)
  }
}

export const structureDefinitionRules: ReadonlyArray<readonly [string, Rule]> = [
  ["StructureDefinition", structureDefinitionChecks]
]

// ---------------------------------------------------------------------------------------------------------
// The FHIR versions an extension definition is for (its version-specific-use extension).

const versionSpecificUse = "http://hl7.org/fhir/StructureDefinition/version-specific-use"
const releaseNames: Readonly<Record<string, string>> = {
  "1.0": "DSTU2", "1.4": "DSTU2.1", "3.0": "STU3", "4.0": "R4", "4.3": "R4B", "5.0": "R5", "6.0": "R6"
}

/** `4.0.1` → [4, 0]. */
const majorMinor = (version: string): ReadonlyArray<number> => version.split(".").slice(0, 2).map((part) => Number.parseInt(part, 10) || 0)

const compareMajorMinor = (a: string, b: string): number => {
  const [a1 = 0, a2 = 0] = majorMinor(a)
  const [b1 = 0, b2 = 0] = majorMinor(b)
  return a1 !== b1 ? a1 - b1 : a2 - b2
}

/**
 * An extension whose definition is only for FHIR versions from `startFhirVersion` or up to `endFhirVersion`
 * (http://hl7.org/fhir/StructureDefinition/version-specific-use) used in an R4 resource outside them.
 */
export const fhirVersionProblems = (
  reporter: { readonly registry: { readonly catalog: { readonly fhirVersion: string } }; readonly report: (severity: "error", code: string, expression: string, diagnostics: string) => void },
  url: string,
  definition: Json,
  path: string
): void => {
  const use = list(definition["extension"]).find((e) => isObject(e) && e["url"] === versionSpecificUse)
  if (!isObject(use)) return
  const current = reporter.registry.catalog.fhirVersion
  const currentMajorMinor = majorMinor(current).join(".")
  const name = (version: string): string => releaseNames[majorMinor(version).join(".")] ?? version
  for (const part of list(use["extension"])) {
    if (!isObject(part)) continue
    const bound = part["valueCode"] ?? part["valueString"] ?? part["valueId"]
    if (typeof bound !== "string") continue
    if (part["url"] === "startFhirVersion" && compareMajorMinor(currentMajorMinor, bound) < 0) {
      reporter.report("error", "business-rule", path, `The definition of the extension '${url}' specifies that the earliest version it can be used with is ${name(bound)} (v${bound}), but this context of use is version ${name(current)} (v${current})`)
    } else if (part["url"] === "endFhirVersion" && compareMajorMinor(currentMajorMinor, bound) > 0) {
      reporter.report("error", "business-rule", path, `The definition of the extension '${url}' specifies that the latest version it can be used with is ${name(bound)} (v${bound}), but this context of use is version ${name(current)} (v${current})`)
    }
  }
}

/**
 * Why the discriminators of a slicing cannot be evaluated on instances: a path that is not FHIRPath
 * (https://hl7.org/fhir/R4/profiling.html#discriminator), or undefined.
 */
export const discriminatorPathProblem = (discriminators: ReadonlyArray<{ readonly path: string }>): string | undefined => {
  for (const { path } of discriminators) {
    const problem = parseProblem(path)
    if (problem !== undefined) return `Error processing path expression for discriminator: ${problem} (src = '${path}')`
  }
  return undefined
}
