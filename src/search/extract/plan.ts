/**
 * What extraction needs of the catalog for one resource type, built on first use and kept per catalog
 * generation in a WeakMap keyed by the Catalog object: a new generation is a new object, so old plans go
 * with it. Only known resource types get a plan, so request data cannot grow it.
 */
import r4 from "fhirpath/fhir-context/r4"
import type { Catalog, SearchParameterDef } from "../../catalog/Catalog.ts"
import { compile, compileBranches, type Engine, type Evaluate, isCompiled, rewrite, splitUnion } from "../../fhirpath/expressions.ts"
import { elementPath, type FhirNode } from "../../fhirpath/nodes.ts"
import { type Canonical, canonicalizer } from "../../terminology/ucum.ts"

export interface ComponentPlan {
  readonly type: string
  readonly code: string
  readonly expression: string
}

export interface ParameterPlan {
  readonly param: SearchParameterDef
  readonly evaluate: Evaluate
  /** Whether the expression is a union of several branches, whose rows may repeat. */
  readonly union: boolean
  /** Top-level keys of which one must be present for the expression to yield anything; undefined: always run. */
  readonly keys: ReadonlyArray<string> | undefined
  readonly components: ReadonlyArray<ComponentPlan>
  /** Whether every branch runs as a compiled path (src/fhirpath/compiledPath.ts) rather than through fhirpath.js. */
  readonly compiled: boolean
}

export interface TypePlan {
  readonly parameters: ReadonlyArray<ParameterPlan>
  /** Parameters whose expression did not compile, by code. */
  readonly uncompiled: ReadonlyArray<string>
  readonly codeSystem: (node: FhirNode) => string | null
  /** `toCanonical`, remembering the units it has read. */
  readonly canonical: (value: number, unit: string) => Canonical | undefined
  /** A component expression compiled relative to the element path it runs on. */
  readonly component: (expression: string, base: string) => Evaluate | undefined
}

export type { Engine }

const plans = { compiled: new WeakMap<Catalog, Map<string, TypePlan>>(), fhirpath: new WeakMap<Catalog, Map<string, TypePlan>>() }

export const planFor = (catalog: Catalog, type: string, engine: Engine = "compiled"): TypePlan | undefined => {
  if (!catalog.isResourceType(type)) return undefined
  let byType = plans[engine].get(catalog)
  if (byType === undefined) {
    byType = new Map()
    plans[engine].set(catalog, byType)
  }
  let plan = byType.get(type)
  if (plan === undefined) {
    plan = buildPlan(catalog, type, engine)
    byType.set(type, plan)
  }
  return plan
}

interface Prepared {
  /** The branches that apply, joined again; undefined when none does. */
  readonly expression: string | undefined
  /** The same branches one by one. */
  readonly branches: ReadonlyArray<string>
  /** The top-level JSON keys the expression reads, or undefined when it cannot be told (always evaluate). */
  readonly keys: ReadonlyArray<string> | undefined
}

const computed = /\b(exists|empty|not|count|iif|all|allTrue|anyTrue)\(|\s(and|or|xor|implies)\s/

/**
 * The part of `expression` that applies to resources of `type`: a union over many resource types
 * (`AllergyIntolerance.patient | CarePlan.subject... | ...`) is cut at its top-level `|` and only the branches
 * that can apply to the type are kept. The first element a branch reads (`Observation.code` reads `code`,
 * `value[x]` its choices) is noted, so that a resource without it skips the evaluation entirely.
 * `isTypeName` tells type names (`Patient`, `Resource`) from element names; `ancestors` are the type and the
 * types it derives from.
 */
const prepare = (
  expression: string,
  type: string,
  ancestors: ReadonlyArray<string>,
  isTypeName: (name: string) => boolean
): Prepared => {
  const kept: Array<string> = []
  const keys = new Set<string>()
  let always = false
  for (const branch of splitUnion(expression)) {
    const head = /^\(*\s*([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?/.exec(branch)
    const first = head?.[1]
    if (first !== undefined && /^[A-Z]/.test(first) && isTypeName(first) && !ancestors.includes(first)) continue
    kept.push(rewrite(branch))
    const element = first !== undefined && /^[A-Z]/.test(first) ? head?.[2] : first
    if (element === undefined || computed.test(branch)) always = true
    else {
      keys.add(element)
      for (const choice of r4.choiceTypePaths[`${type}.${element}`] ?? []) keys.add(element + choice)
    }
  }
  if (kept.length === 0) return { expression: undefined, branches: [], keys: [] }
  return { expression: kept.join(" | "), branches: kept, keys: always ? undefined : [...keys] }
}

const buildPlan = (catalog: Catalog, type: string, engine: Engine): TypePlan => {
  const ancestors = catalog.ancestors(type)
  const isTypeName = (name: string) => catalog.structureDefinitionForType(name) !== undefined || catalog.isResourceType(name)
  const parameters: Array<ParameterPlan> = []
  const uncompiled: Array<string> = []
  for (const param of catalog.searchParameters(type).values()) {
    if (param.expression === undefined || param.expression.trim() === "") continue
    const prepared = prepare(param.expression, type, ancestors, isTypeName)
    if (prepared.expression === undefined) continue
    const evaluate = compileBranches(prepared.branches, engine)
    if (evaluate === undefined) {
      uncompiled.push(param.code)
      continue
    }
    const components = param.components.map((component) => {
      const definition = catalog.searchParameterByUrl(component.definition)
      return { type: definition?.type ?? "token", code: definition?.code ?? param.code, expression: component.expression }
    })
    const compiled = engine === "compiled" && prepared.branches.every((branch) => isCompiled(branch))
    parameters.push({ param, evaluate, union: prepared.branches.length > 1, keys: prepared.keys, components, compiled })
  }
  const componentCache = new Map<string, Map<string, Evaluate | undefined>>()
  const systems = new Map<string, string | null>()
  return {
    parameters,
    uncompiled,
    canonical: canonicalizer(),
    codeSystem: (node) => {
      const path = elementPath(node)
      if (path === undefined) return null
      let system = systems.get(path)
      if (system === undefined) {
        system = boundSystem(catalog, path)
        systems.set(path, system)
      }
      return system
    },
    component: (expression, base) => {
      let byExpression = componentCache.get(base)
      if (byExpression === undefined) {
        byExpression = new Map()
        componentCache.set(base, byExpression)
      }
      if (!byExpression.has(expression)) byExpression.set(expression, compile(expression, base, engine))
      return byExpression.get(expression)
    }
  }
}

/** The one code system of the value set bound to an element, or null (https://hl7.org/fhir/R4/search.html#token). */
const boundSystem = (catalog: Catalog, path: string): string | null => {
  const typeName = path.slice(0, path.indexOf("."))
  const element = catalog.structureDefinitionForType(typeName)?.snapshot?.element.find((e) => e.path === path)
  const valueSet = element?.binding?.valueSet
  if (valueSet === undefined) return null
  const definition = catalog.valueSet(valueSet) ?? catalog.valueSet(valueSet.split("|")[0] ?? valueSet)
  const systems = new Set((definition?.compose?.include ?? []).map((include) => include.system))
  const [only] = systems
  return systems.size === 1 && only !== undefined ? only : null
}
