/**
 * Where an extension may be used (https://hl7.org/fhir/R4/defining-extensions.html#context). A context
 * matches the element's path (a contentReference element by the path it refers to: `Questionnaire.item`
 * for nested items), its type or a type it derives from, `Element`, or for an `extension` context the url
 * of the extension it sits in. `fhirpath` contexts are not judged.
 */
import type { CompiledStructure, ElementNode } from "./compile.ts"
import type { Registry } from "./registry.ts"

/** The element whose members are being walked: what an extension among them is used on. */
export interface Owner {
  readonly type: string
  readonly path: string
  readonly url?: string | undefined
}

/** The path an element is known by in extension contexts. */
export const contextPath = (node: ElementNode): string => {
  const reference = node.definition.contentReference
  return reference !== undefined && reference.startsWith("#") ? reference.slice(1) : node.path
}

/** `CapabilityStatement.rest.operation` is written as a reference to `CapabilityStatement.rest.resource.operation`. */
const sameElement = (registry: Registry, expression: string, path: string): boolean => {
  const node = registry.forType(expression.slice(0, expression.indexOf(".")))?.byId.get(expression)
  return node !== undefined && contextPath(node) === path
}

/** Why the extension defined by `structure` does not belong on `owner`, or undefined when it does. */
export const contextProblem = (registry: Registry, structure: CompiledStructure, owner: Owner): string | undefined => {
  if (structure.contexts.length === 0) return undefined
  for (const { type, expression } of structure.contexts) {
    if (type === "fhirpath") return undefined
    if (type === "extension" && owner.type === "Extension" && owner.url === expression) return undefined
    if (type !== "element") continue
    if (expression === "Element" || expression === owner.path || expression.replace("[x]", "") === owner.path.replace("[x]", "")) return undefined
    if (expression.includes(".") ? sameElement(registry, expression, owner.path) : registry.ancestors(owner.type).includes(expression)) return undefined
  }
  const allowed = structure.contexts.map(({ expression }) => expression).join(", ")
  return `The extension ${structure.url} is not meant for ${owner.path} (it is for: ${allowed})`
}
