/**
 * The element an extension is used on, for extension contexts
 * (https://hl7.org/fhir/R4/defining-extensions.html#context; judged in extensions.ts).
 */
import type { ElementNode } from "./compile.ts"

/** The element whose members are being walked: what an extension among them is used on. */
export interface Owner {
  readonly type: string
  readonly path: string
  /** An extension's url, or for the value of an extension the url of that extension. */
  readonly url?: string | undefined
}

/** The path an element is known by in extension contexts: a contentReference element by the path it refers to. */
export const contextPath = (node: ElementNode): string => {
  const reference = node.definition.contentReference
  return reference !== undefined && reference.startsWith("#") ? reference.slice(1) : node.path
}
