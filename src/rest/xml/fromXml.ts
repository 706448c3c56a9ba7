/**
 * FHIR XML to FHIR JSON (https://hl7.org/fhir/R4/xml.html, https://hl7.org/fhir/R4/json.html): the
 * StructureDefinitions say which elements repeat (JSON arrays), which primitives are JSON booleans or numbers,
 * and where choice types and attributes are. Anything they do not allow is refused, naming the path and line.
 * A decimal keeps its text (`2.500`) beside the number (src/json/lexical.ts).
 */
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { isCanonical, markTree, setLexical } from "../../json/lexical.ts"
import { FHIR_NS, XHTML_NS } from "./toXml.ts"
import { narrativeText } from "./narrative.ts"
import { modelsFor, type TypeModel, type TypeRef, type XmlModels } from "./XmlModel.ts"
import { isWhitespace, parseXml, type XmlElement, XmlSyntaxError } from "./XmlParser.ts"
import { lineAt, XmlProblem } from "./XmlProblem.ts"

const XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
const integerSyntax = /^[-+]?(0|[1-9][0-9]*)$/
const lineEnds = /\r\n?/g
const decimalSyntax = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/

class ReadError extends Error {
  constructor(readonly reason: string, readonly path: string | undefined, readonly offset: number | undefined) {
    super(reason)
  }
}

const fail = (reason: string, path: string, element: XmlElement): never => {
  throw new ReadError(reason, path, element.start)
}

const qualified = (element: XmlElement) => element.prefix === "" ? element.local : `${element.prefix}:${element.local}`

/** A repeating primitive: its values and its `_name` objects, aligned, `null` where one side is absent. */
interface Repeated {
  readonly values: Array<unknown>
  /** The texts of the values that are decimals written otherwise than JavaScript writes them. */
  readonly texts: Array<string | undefined>
  readonly extras: Array<unknown>
  hasValue: boolean
  hasExtra: boolean
}

class Reader {
  /** The text of the number the last `primitive` read, when it is not JavaScript's. */
  private lexeme: string | undefined = undefined
  /** Whether any decimal's text was kept (then the containers above it are marked at the end). */
  keptTexts = false

  constructor(readonly models: XmlModels, readonly catalog: Catalog, readonly source: string) {}

  resource(element: XmlElement, path: string): Record<string, unknown> {
    if (element.ns !== FHIR_NS) {
      fail(`the element <${qualified(element)}> is in the namespace '${element.ns}', not '${FHIR_NS}'`, path, element)
    }
    const type = element.local
    const model = this.catalog.isResourceType(type) ? this.models.forType(type) : undefined
    if (model === undefined) return fail(`<${type}> is not a resource type`, path, element)
    const json: Record<string, unknown> = { resourceType: type }
    this.body(element, model, json, type)
    return json
  }

  private body(element: XmlElement, model: TypeModel, json: Record<string, unknown>, path: string): void {
    for (const attribute of element.attributes) {
      if (attribute.ns === XSI_NS) continue
      const lookup = attribute.ns === "" ? model.byName.get(attribute.local) : undefined
      if (lookup === undefined || !lookup.element.attribute) {
        fail(`the attribute '${attribute.local}' is not allowed`, path, element)
      } else {
        json[attribute.local] = this.primitive(attribute.value, lookup.type, `${path}.${attribute.local}`, element)
      }
    }
    let lastIndex = -1
    let repeated: Map<string, Repeated> | undefined
    for (const child of element.children) {
      if (typeof child === "string") {
        if (!isWhitespace(child)) fail("text content is not allowed here", path, element)
        continue
      }
      const childPath = `${path}.${child.local}`
      const lookup = model.byName.get(child.local)
      if (child.ns !== FHIR_NS && lookup?.type.kind !== "xhtml") {
        fail(`the element <${qualified(child)}> is in the namespace '${child.ns}', not '${FHIR_NS}'`, childPath, child)
      }
      if (lookup === undefined || lookup.element.attribute) return fail("unknown element", childPath, child)
      const { element: definition, index, type } = lookup
      if (index < lastIndex) fail("element out of order (FHIR XML requires the order of the definition)", childPath, child)
      if (index === lastIndex && !definition.repeats) fail("element repeated, but it may occur only once", childPath, child)
      lastIndex = index
      const name = type.name
      if (type.kind !== "primitive") {
        const value = this.value(child, type, childPath)
        const present = json[name]
        if (!definition.repeats) json[name] = value
        else if (Array.isArray(present)) present.push(value)
        else json[name] = [value]
        continue
      }
      const [value, extra, lexeme] = this.primitiveElement(child, type, childPath)
      if (!definition.repeats) {
        if (value !== undefined) json[name] = value
        if (lexeme !== undefined) setLexical(json, name, lexeme)
        if (extra !== undefined) json["_" + name] = extra
        continue
      }
      repeated ??= new Map()
      let list = repeated.get(name)
      if (list === undefined) {
        list = { values: [], texts: [], extras: [], hasValue: false, hasExtra: false }
        repeated.set(name, list)
      }
      if (lexeme !== undefined) list.texts[list.values.length] = lexeme
      list.values.push(value ?? null)
      list.extras.push(extra ?? null)
      if (value !== undefined) list.hasValue = true
      if (extra !== undefined) list.hasExtra = true
    }
    for (const [name, list] of repeated ?? []) {
      if (list.hasValue) json[name] = list.values
      list.texts.forEach((text, index) => setLexical(list.values, index, text))
      if (list.hasExtra) json["_" + name] = list.extras
    }
  }

  private value(element: XmlElement, type: TypeRef, path: string): unknown {
    switch (type.kind) {
      case "xhtml":
        if (element.ns !== XHTML_NS || element.local !== "div") {
          fail(`the narrative must be an XHTML <div> in the namespace '${XHTML_NS}'`, path, element)
        }
        return narrativeText(element, this.source, (reason, at) => fail(reason, path, at))
      case "resource": {
        let inner: XmlElement | undefined
        for (const child of element.children) {
          if (typeof child === "string") {
            if (!isWhitespace(child)) fail("text content is not allowed here", path, element)
          } else if (inner !== undefined) {
            fail("more than one resource in one element", path, child)
          } else {
            inner = child
          }
        }
        if (element.attributes.length > 0) fail("attributes are not allowed on a resource container", path, element)
        return inner === undefined ? fail("a resource was expected inside", path, element) : this.resource(inner, path)
      }
      default: {
        const json: Record<string, unknown> = {}
        this.body(element, type.model(), json, path)
        for (const _ in json) return json
        return fail("an empty element (it needs children, an id or extensions)", path, element)
      }
    }
  }

  /**
   * A primitive element: its JSON value and its `_name` object (id and extensions), each when present, and
   * the value's text when it is a decimal JavaScript would write otherwise.
   */
  private primitiveElement(
    element: XmlElement,
    type: TypeRef,
    path: string
  ): [unknown, Record<string, unknown> | undefined, string | undefined] {
    let value: unknown
    let lexeme: string | undefined
    const extra: Record<string, unknown> = {}
    let hasExtra = false
    for (const attribute of element.attributes) {
      if (attribute.ns === XSI_NS) continue
      if (attribute.ns !== "" || (attribute.local !== "value" && attribute.local !== "id")) {
        fail(`the attribute '${attribute.local}' is not allowed on a primitive`, path, element)
      }
      if (attribute.local === "value") {
        value = this.primitive(attribute.value, type, path, element)
        lexeme = this.lexeme
      } else {
        if (attribute.value === "") fail("an empty id attribute", path, element)
        extra["id"] = attribute.value
        hasExtra = true
      }
    }
    const extensionType = this.models.forType("Extension")
    const extensions: Array<unknown> = []
    for (const child of element.children) {
      if (typeof child === "string") {
        if (!isWhitespace(child)) fail("text content is not allowed in a primitive (use the value attribute)", path, element)
        continue
      }
      const childPath = `${path}.${child.local}`
      if (child.ns !== FHIR_NS || child.local !== "extension" || extensionType === undefined) {
        fail("only extensions may appear inside a primitive element", childPath, child)
      } else {
        const json: Record<string, unknown> = {}
        this.body(child, extensionType, json, childPath)
        extensions.push(json)
      }
    }
    if (extensions.length > 0) {
      extra["extension"] = extensions
      hasExtra = true
    }
    if (value === undefined && !hasExtra) fail("a primitive element needs a value, an id or extensions", path, element)
    return [value, hasExtra ? extra : undefined, lexeme]
  }

  private primitive(text: string, type: TypeRef, path: string, element: XmlElement): unknown {
    if (text === "") return fail("an empty value (attributes may not be empty)", path, element)
    this.lexeme = undefined
    switch (type.json) {
      case "boolean":
        return text === "true" ? true : text === "false" ? false : fail(`'${text}' is not a boolean`, path, element)
      case "number": {
        const syntax = type.code === "decimal" || type.code.endsWith("System.Decimal") ? decimalSyntax : integerSyntax
        const number = syntax.test(text) ? Number(text) : Number.NaN
        if (!Number.isFinite(number)) return fail(`'${text}' is not a valid ${type.code}`, path, element)
        // Kept when it is JSON's syntax too (an integer written `+5` is just 5).
        if (!isCanonical(text) && decimalSyntax.test(text)) {
          this.lexeme = text
          this.keptTexts = true
        }
        return number
      }
      case "string":
        return text
    }
  }
}

export const fromXml = (text: string, catalog: Catalog): Either.Either<Record<string, unknown>, XmlProblem> => {
  let source = text
  try {
    const document = parseXml(text)
    source = document.source
    const reader = new Reader(modelsFor(catalog), catalog, source)
    const resource = reader.resource(document.root, document.root.local)
    if (reader.keptTexts) markTree(resource)
    return Either.right(resource)
  } catch (error) {
    if (error instanceof XmlSyntaxError) {
      // The parser's offsets are in the text with its line ends normalised.
      const normalised = source.includes("\r") ? source.replace(lineEnds, "\n") : source
      const line = lineAt(normalised, error.offset)
      return Either.left(new XmlProblem({ reason: `malformed XML: ${error.reason}`, path: undefined, line }))
    }
    if (error instanceof ReadError) {
      const line = error.offset === undefined ? undefined : lineAt(source, error.offset)
      return Either.left(new XmlProblem({ reason: error.reason, path: error.path, line }))
    }
    throw error
  }
}
