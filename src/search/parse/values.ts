/**
 * One comma alternative of a search value, read by its parameter's type and modifier.
 * https://hl7.org/fhir/R4/search.html#ptypes
 * Strings, tokens, URIs and references are free text and never fail; the others return the problem.
 */
import type { Catalog, SearchParameterDef, SearchParamType } from "../../catalog/Catalog.ts"
import { readDate } from "./dates.ts"
import { splitUnescaped, unescape } from "./escape.ts"
import { pointsAtAnything } from "./modifiers.ts"
import { readDecimal, readNear, readPrefix, readQuantity } from "./numbers.ts"
import { expandValueSet, subsumed } from "../../terminology/expand.ts"
import { bareIdForAnyTarget, cannotExpand, unreadable, unsupported } from "./problems.ts"
import {
  type CompositePart,
  type Modifier,
  type Parameter,
  parameterType,
  type Prefix,
  prefixes,
  type Problem,
  type ReferenceValue,
  type TokenValue,
  type Value
} from "./SearchRequest.ts"

export interface ValueContext {
  /** The parameter as written, modifier included: what a problem names. */
  readonly key: string
  readonly param: Parameter
  readonly modifier: Modifier | undefined
  readonly catalog: Catalog
}

const prefixList = prefixes.join(" ")
export const expected = {
  date: `a date, dateTime or instant (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]][Z|+hh:mm|-hh:mm]), optionally after a prefix ${prefixList}`,
  number: `a decimal number, optionally after a prefix ${prefixList}`,
  quantity: `[prefix]number or [prefix]number|system|code, the prefix one of ${prefixList}`,
  near: "latitude|longitude[|distance[|units]], the units a UCUM length (km when left out)",
  missing: "true or false",
  ofType: "system|code|value",
  composite: (n: number, codes: string) => `${n} parts separated by $ (${codes})`
} as const

export const readValue = (ctx: ValueContext, text: string): Value | Problem => {
  const { key, param, modifier } = ctx
  switch (modifier?.kind) {
    case "missing": {
      const plain = unescape(text)
      if (plain === "true" || plain === "false") return { kind: "missing", missing: plain === "true" }
      return unreadable(key, plain, expected.missing)
    }
    case "of-type": {
      const parts = splitUnescaped(text, "|").map(unescape)
      const [system, code, value] = parts
      if (parts.length !== 3 || !system || !code || !value) return unreadable(key, unescape(text), expected.ofType)
      return { kind: "of-type", system, code, value }
    }
    case "text":
    case "exact":
    case "contains":
      return { kind: "string", value: unescape(text) }
    case "in":
    case "not-in": {
      const url = unescape(text)
      const expansion = expandValueSet(ctx.catalog, url)
      return "problem" in expansion ? cannotExpand(key, url, expansion.problem) : { kind: "codes", codes: expansion.codes }
    }
    case "above":
    case "below": {
      if (parameterType(param) !== "token") return { kind: "uri", value: unescape(text) }
      const token = readToken(text)
      if (token.system === undefined || token.system === "" || token.code === undefined) {
        return unreadable(key, unescape(text), `system|code: :${modifier.kind} follows the hierarchy of a code system`)
      }
      const expansion = subsumed(ctx.catalog, token.system, token.code, modifier.kind)
      return "problem" in expansion ? cannotExpand(key, unescape(text), expansion.problem) : { kind: "codes", codes: expansion.codes }
    }
    case "identifier":
      return readToken(text)
    default:
      break
  }
  if (param === "_id") return { kind: "id", id: unescape(text) }
  return readTyped(ctx, parameterType(param), text)
}

const readTyped = (ctx: ValueContext, type: SearchParamType, text: string): Value | Problem => {
  const { key, param } = ctx
  switch (type) {
    case "string":
      return { kind: "string", value: unescape(text) }
    case "uri":
      return { kind: "uri", value: unescape(text) }
    case "token":
      return readToken(text)
    case "date": {
      const { prefix, rest } = readPrefix(unescape(text))
      const range = readDate(rest)
      if (range === undefined) return unreadable(key, unescape(text), expected.date)
      return checkPrefix(ctx, text, prefix) ?? { kind: "date", prefix, ...range }
    }
    case "number": {
      const { prefix, rest } = readPrefix(unescape(text))
      const number = readDecimal(rest)
      if (number === undefined) return unreadable(key, unescape(text), expected.number)
      return checkPrefix(ctx, text, prefix) ?? { kind: "number", prefix, ...number }
    }
    case "quantity": {
      const quantity = readQuantity(text)
      if (quantity === undefined) return unreadable(key, unescape(text), expected.quantity)
      return checkPrefix(ctx, text, quantity.prefix) ?? quantity
    }
    case "reference":
      return readReference(ctx, text)
    case "composite":
      return typeof param === "string" ? { kind: "string", value: unescape(text) } : readComposite(ctx, param, text)
    case "special":
      if (typeof param !== "string" && param.code === "near") {
        return readNear(text) ?? unreadable(key, unescape(text), expected.near)
      }
      return unsupported(key, unescape(text), `The special search parameter '${key}'`)
  }
}

/** A prefix the parameter's `comparator` list leaves out; an empty list allows every prefix. */
const checkPrefix = (ctx: ValueContext, text: string, prefix: Prefix): Problem | undefined => {
  if (typeof ctx.param === "string" || prefix === "eq") return undefined
  const comparators = ctx.param.comparators
  if (comparators.length === 0 || comparators.includes(prefix)) return undefined
  return unreadable(ctx.key, unescape(text), `a value without prefix or with one of ${comparators.join(" ")}`)
}

/** `code`, `system|code`, `|code` (no system: `system` is ""), `system|` (any code). */
export const readToken = (text: string): TokenValue => {
  const bar = splitUnescaped(text, "|")
  if (bar.length === 1) return { kind: "token", code: unescape(text) }
  const system = unescape(bar[0] ?? "")
  const code = unescape(bar.slice(1).join("|"))
  return code === "" ? { kind: "token", system } : { kind: "token", system, code }
}

const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:/
const tail = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9.-]{1,64})(?:\/_history\/([A-Za-z0-9.-]{1,64}))?$/

const readReference = (ctx: ValueContext, raw: string): ReferenceValue | Problem => {
  const { key, param, modifier, catalog } = ctx
  const text = unescape(raw)
  const typed = modifier?.kind === "type" ? [modifier.type] : undefined
  const local = tail.exec(text)
  const resourceType = local?.[1]
  if (local !== null && resourceType !== undefined && catalog.isResourceType(resourceType)) {
    const version = local[3]
    const relative = !scheme.test(text) && local.index === 0
    return {
      kind: "reference",
      types: [resourceType],
      ...(local[2] === undefined ? {} : { id: local[2] }),
      ...(relative ? {} : { url: text }),
      ...(version === undefined ? {} : { version })
    }
  }
  if (scheme.test(text) || text.includes("/")) {
    // A canonical reference may carry `|version`.
    const bar = splitUnescaped(raw, "|")
    const url = unescape(bar[0] ?? "")
    const version = bar.length > 1 ? unescape(bar.slice(1).join("|")) : undefined
    return { kind: "reference", types: typed ?? [], url, ...(version === undefined ? {} : { version }) }
  }
  if (typed !== undefined) return { kind: "reference", types: typed, id: text }
  if (typeof param === "string" || pointsAtAnything(param, catalog)) return bareIdForAnyTarget(key, text)
  return { kind: "reference", types: param.target, id: text }
}

const readComposite = (ctx: ValueContext, param: SearchParameterDef, raw: string): Value | Problem => {
  const pieces = splitUnescaped(raw, "$")
  const components = param.components.map((c) => ({ url: c.definition, def: ctx.catalog.searchParameterByUrl(c.definition) }))
  const codes = components.map((c) => c.def?.code ?? c.url).join("$")
  const wanted = expected.composite(components.length, codes)
  if (pieces.length !== components.length) return unreadable(ctx.key, unescape(raw), wanted)
  const parts: Array<CompositePart> = []
  for (const [i, component] of components.entries()) {
    const piece = pieces[i] ?? ""
    const partCtx: ValueContext = { ...ctx, param: component.def ?? param, modifier: undefined }
    const value = component.def === undefined ? { kind: "string" as const, value: unescape(piece) } : readTyped(partCtx, component.def.type, piece)
    if ("message" in value) return unreadable(ctx.key, unescape(raw), `${wanted}; part ${i + 1}: ${value.expected}`)
    parts.push({ component: component.url, value })
  }
  return { kind: "composite", parts }
}
