/**
 * FHIR JSON to FHIR XML (https://hl7.org/fhir/R4/xml.html), element order and names taken from the
 * StructureDefinitions. Expects a resource that is valid JSON FHIR: properties no definition names are left
 * out. A decimal is written with the text it was read with (`1.50`, kept by src/json/lexical.ts) while it
 * holds the same number, otherwise as JavaScript writes the number.
 */
import { Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { lexicalOf } from "../../json/lexical.ts"
import { Pacer, yieldToEventLoop } from "../../db/EventLoop.ts"
import { modelsFor, type TypeModel, type TypeRef, type XmlModels } from "./XmlModel.ts"
import { parseXml, XmlSyntaxError } from "./XmlParser.ts"
import { embedMarkup, escapeAttribute, escapeText } from "./xmlText.ts"

export { escapeAttribute, escapeText } from "./xmlText.ts"

export const FHIR_NS = "http://hl7.org/fhir"
export const XHTML_NS = "http://www.w3.org/1999/xhtml"

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const scalar = (value: unknown): string | undefined =>
  typeof value === "string" ? value : typeof value === "number" || typeof value === "boolean" ? String(value) : undefined

/**
 * The narrative is embedded as markup when it is one well-formed `div` element; one without its XHTML
 * namespace declaration gets it, and anything else is kept as text inside a `div` so that nothing is lost.
 * Its CRs are written as references (xmlText.ts).
 */
const narrative = (div: string): string => {
  try {
    const { root } = parseXml(div)
    if (root.local === "div" && root.prefix === "" && root.ns === XHTML_NS) return embedMarkup(div)
    if (root.local === "div" && root.prefix === "" && root.ns === "" && div.startsWith("<div")) {
      return `<div xmlns="${XHTML_NS}"${embedMarkup(div).slice(4)}`
    }
  } catch (error) {
    if (!(error instanceof XmlSyntaxError)) throw error
  }
  return `<div xmlns="${XHTML_NS}">${escapeText(div)}</div>`
}

/**
 * The writer's steps: it pauses (yields) before each resource inside the one written (contained resources,
 * Bundle entries, Parameters) and every 64 items of a repeating element, so a large resource can be written
 * in slices between which other requests run (`toXmlSliced`); `toXml` runs the steps through at once.
 */
type Steps = Generator<void, void, undefined>

const drain = (steps: Steps): void => {
  while (!steps.next().done) { /* run every step */ }
}

interface Present {
  readonly index: number
  readonly type: TypeRef
}

/** Writes by string concatenation, which V8 keeps as a rope: linear, with one flattening at the end. */
class Writer {
  out = ""
  private readonly indents: Array<string> = []
  constructor(readonly models: XmlModels, readonly pretty: boolean) {}

  private indent(depth: number): string {
    if (!this.pretty) return ""
    let known = this.indents[depth]
    if (known === undefined) {
      known = "\n" + "  ".repeat(depth)
      this.indents[depth] = known
    }
    return known
  }

  *resource(json: Record<string, unknown>, depth: number, root: boolean): Steps {
    const type = json["resourceType"]
    const model = typeof type === "string" ? this.models.forType(type) : undefined
    if (typeof type !== "string" || model === undefined) return
    if (!root) yield
    this.out += (depth === 0 ? "" : this.indent(depth)) + "<" + type + (root ? ` xmlns="${FHIR_NS}"` : "")
    yield* this.body(json, model, depth, type)
  }

  /** The elements present in `json`, in the order of the definition; JSON objects have few keys, models many. */
  private present(json: Record<string, unknown>, model: TypeModel): Array<Present> {
    const found: Array<Present> = []
    for (const key in json) {
      const lookup = model.byName.get(key.charCodeAt(0) === 0x5f ? key.slice(1) : key)
      if (lookup === undefined || lookup.element.attribute) continue
      let at = found.length
      while (at > 0 && (found[at - 1]?.index ?? 0) > lookup.index) at--
      if (found[at - 1]?.type === lookup.type) continue
      found.splice(at, 0, { index: lookup.index, type: lookup.type })
    }
    return found
  }

  /** Attributes and children of an open tag `<name` already written; closes it. */
  private *body(json: Record<string, unknown>, model: TypeModel, depth: number, name: string): Steps {
    for (const element of model.elements) {
      if (!element.attribute) continue
      const attribute = element.types[0]?.name ?? ""
      const value = scalar(json[attribute])
      if (value !== undefined) this.out += " " + attribute + "=\"" + escapeAttribute(value) + "\""
    }
    const present = this.present(json, model)
    if (present.length === 0) {
      this.out += "/>"
      return
    }
    this.out += ">"
    for (const { index, type } of present) {
      const value = json[type.name]
      const extra = type.kind === "primitive" ? json[type.extraName] : undefined
      if (model.elements[index]?.repeats !== true) {
        if (type.kind === "primitive" || type.kind === "xhtml") {
          this.leaf(type, value, extra, depth + 1, typeof value === "number" ? lexicalOf(json, type.name) : undefined)
        } else {
          yield* this.nested(type, value, depth + 1)
        }
      } else if (Array.isArray(value) || Array.isArray(extra)) {
        const values = Array.isArray(value) ? value : []
        const extras = Array.isArray(extra) ? extra : []
        const count = Math.max(values.length, extras.length)
        const leaves = type.kind === "primitive" || type.kind === "xhtml"
        for (let k = 0; k < count; k++) {
          const item: unknown = values[k]
          if (leaves) this.leaf(type, item, extras[k], depth + 1, typeof item === "number" ? lexicalOf(values, k) : undefined)
          else yield* this.nested(type, item, depth + 1)
          if ((k & 63) === 63) yield
        }
      }
    }
    this.out += this.indent(depth) + "</" + name + ">"
  }

  /** A primitive or the narrative. */
  private leaf(type: TypeRef, value: unknown, extra: unknown, depth: number, lexeme?: string): void {
    switch (type.kind) {
      case "primitive": {
        const text = lexeme ?? scalar(value)
        const id = isRecord(extra) ? scalar(extra["id"]) : undefined
        const extensions = isRecord(extra) ? extra["extension"] : undefined
        const hasExtensions = Array.isArray(extensions) && extensions.length > 0
        if (text === undefined && id === undefined && !hasExtensions) return
        this.out += this.indent(depth) + "<" + type.name
        if (id !== undefined) this.out += " id=\"" + escapeAttribute(id) + "\""
        if (text !== undefined) this.out += " value=\"" + escapeAttribute(text) + "\""
        if (!hasExtensions) {
          this.out += "/>"
          return
        }
        this.out += ">"
        const extension = this.models.forType("Extension")
        for (const item of extensions) {
          if (!isRecord(item) || extension === undefined) continue
          this.out += this.indent(depth + 1) + "<extension"
          drain(this.body(item, extension, depth + 1, "extension"))
        }
        this.out += this.indent(depth) + "</" + type.name + ">"
        return
      }
      case "xhtml":
        if (typeof value === "string") this.out += this.indent(depth) + narrative(value)
        return
    }
  }

  /** A resource (wrapped in an element named after the element) or an element of a complex type. */
  private *nested(type: TypeRef, value: unknown, depth: number): Steps {
    if (!isRecord(value)) return
    this.out += this.indent(depth) + "<" + type.name
    if (type.kind === "resource") {
      this.out += ">"
      yield* this.resource(value, depth + 1, false)
      this.out += this.indent(depth) + "</" + type.name + ">"
    } else {
      yield* this.body(value, type.model(), depth, type.name)
    }
  }
}

const writerFor = (catalog: Catalog, pretty: boolean): Writer => {
  const writer = new Writer(modelsFor(catalog), pretty)
  writer.out = pretty ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" : "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
  return writer
}

export const toXml = (
  resource: Record<string, unknown>,
  catalog: Catalog,
  options?: { readonly pretty?: boolean }
): string => {
  const writer = writerFor(catalog, options?.pretty === true)
  drain(writer.resource(resource, 0, true))
  return writer.out
}

/** Pauses of the writer between two yields to the event loop: some 50 Bundle entries or 3,000 list items. */
const stepsPerSlice = 50

/**
 * The same text as `toXml`, written in slices with the event loop given back between them, so that a
 * resource of many megabytes (a large Bundle, a ValueSet of thousands of codes) does not hold up other requests.
 */
export const toXmlSliced = (
  resource: Record<string, unknown>,
  catalog: Catalog,
  options?: { readonly pretty?: boolean }
): Effect.Effect<string> =>
  Effect.gen(function*() {
    const writer = writerFor(catalog, options?.pretty === true)
    const steps = writer.resource(resource, 0, true)
    const pacer = new Pacer(stepsPerSlice)
    while (!steps.next().done) {
      if (pacer.due(1)) yield* yieldToEventLoop
    }
    return writer.out
  })
