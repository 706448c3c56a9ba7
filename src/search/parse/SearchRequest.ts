/**
 * A search query string read into typed clauses, before any planning.
 * https://hl7.org/fhir/R4/search.html and the "Search rules" of the interface spec.
 */
import type { SearchParameterDef, SearchParamType } from "../../catalog/Catalog.ts"

export type Prefix = "eq" | "ne" | "gt" | "lt" | "ge" | "le" | "sa" | "eb" | "ap"
export const prefixes: ReadonlyArray<Prefix> = ["eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap"]

export type DatePrecision = "year" | "month" | "day" | "minute" | "second" | "millisecond"

/** `system` absent: any system; `system: ""`: no system (`|code`). `code` absent: any code (`system|`). */
export interface TokenValue { readonly kind: "token"; readonly system?: string; readonly code?: string }
export interface StringValue { readonly kind: "string"; readonly value: string }
export interface UriValue { readonly kind: "uri"; readonly value: string }
export interface IdValue { readonly kind: "id"; readonly id: string }
/** `[low, high)` in epoch milliseconds, UTC when the value names no timezone. */
export interface DateValue {
  readonly kind: "date"
  readonly prefix: Prefix
  readonly low: number
  readonly high: number
  readonly precision: DatePrecision
}
/** `[low, high)`: the implicit range of the value's significant figures. */
export interface NumberValue { readonly kind: "number"; readonly prefix: Prefix; readonly value: number; readonly low: number; readonly high: number }
export interface QuantityValue {
  readonly kind: "quantity"
  readonly prefix: Prefix
  readonly value: number
  readonly low: number
  readonly high: number
  readonly system?: string
  readonly code?: string
}
/**
 * `types`: the resource types the reference may point at; a bare id lists every target of the parameter,
 * `Type/id` lists one, an absolute URL lists the type read from its tail, if any.
 */
export interface ReferenceValue {
  readonly kind: "reference"
  readonly types: ReadonlyArray<string>
  readonly id?: string
  readonly url?: string
  readonly version?: string
}
export interface CompositePart { readonly component: string; readonly value: Value }
export interface CompositeValue { readonly kind: "composite"; readonly parts: ReadonlyArray<CompositePart> }
export interface NearValue {
  readonly kind: "near"
  readonly latitude: number
  readonly longitude: number
  readonly distance?: number
  readonly units?: string
  /** The distance in metres, when one is given (units default to km). */
  readonly meters?: number
}
/** The codes a token `:in`, `:not-in`, `:above` or `:below` stands for, read from the catalog's terminology. */
export interface CodesValue { readonly kind: "codes"; readonly codes: ReadonlyArray<{ readonly system: string; readonly code: string }> }
export interface MissingValue { readonly kind: "missing"; readonly missing: boolean }
export interface OfTypeValue { readonly kind: "of-type"; readonly system: string; readonly code: string; readonly value: string }

export type Value =
  | TokenValue
  | StringValue
  | UriValue
  | IdValue
  | DateValue
  | NumberValue
  | QuantityValue
  | ReferenceValue
  | CompositeValue
  | NearValue
  | MissingValue
  | OfTypeValue
  | CodesValue

/** The common parameters read without a catalog definition (`_id` always, the others when the catalog lacks them). */
export type CommonCode = "_id" | "_lastUpdated" | "_tag" | "_profile" | "_security" | "_source" | "_text" | "_content" | "_list"
export const commonTypes: Readonly<Record<CommonCode, SearchParamType>> = {
  _id: "token",
  _lastUpdated: "date",
  _tag: "token",
  _profile: "uri",
  _security: "token",
  _source: "uri",
  _text: "string",
  _content: "string",
  _list: "string"
}
export const isCommonCode = (code: string): code is CommonCode => Object.hasOwn(commonTypes, code)

export type Parameter = SearchParameterDef | CommonCode
export const parameterType = (param: Parameter): SearchParamType =>
  typeof param === "string" ? commonTypes[param] : param.type

/** `exact`, `contains`, `text`, `not`, `above`, `below`, `in`, `not-in`, `of-type`, `identifier`, `missing`, or a resource type. */
export type Modifier =
  | { readonly kind: "missing" | "exact" | "contains" | "text" | "not" | "above" | "below" | "in" | "not-in" | "of-type" | "identifier" }
  | { readonly kind: "type"; readonly type: string }

/** One occurrence of a parameter; its values are ORed, the clauses of a request are ANDed. */
export interface Clause {
  readonly code: string
  readonly param: Parameter
  readonly modifier?: Modifier
  /** `:not` and `:not-in`: a match has none of the values (NOT IN), not "differs from one of them". */
  readonly exclude: boolean
  readonly values: ReadonlyArray<Value>
}

/**
 * A chained parameter, `param[:Type].rest` (https://hl7.org/fhir/R4/search.html#chaining): resources whose
 * reference `param` points at a current resource of one of the target types that matches that type's `inner`.
 * `targets` lists one entry per target type the chain reads (the `:Type` one, or the one type defining `rest`).
 */
export interface ChainClause {
  readonly kind: "chain"
  /** The key as written, e.g. `subject:Patient.name:exact`. */
  readonly key: string
  readonly param: SearchParameterDef
  readonly targets: ReadonlyArray<{ readonly type: string; readonly inner: Criterion }>
}

/**
 * Reverse chaining, `_has:Type:param:rest` (https://hl7.org/fhir/R4/search.html#has): resources that a current
 * `sourceType` resource matching `inner` refers to through its reference parameter `param`.
 */
export interface HasClause {
  readonly kind: "has"
  readonly key: string
  readonly sourceType: string
  readonly param: SearchParameterDef
  readonly inner: Criterion
}

/** One criterion of a search: a parameter on the searched type, a chain or a reverse chain. */
export type Criterion = Clause | ChainClause | HasClause

/** The comparison operators of `_filter` (https://hl7.org/fhir/R4/search_filter.html#ops). */
export type FilterOperator =
  | "eq" | "ne" | "co" | "sw" | "ew" | "gt" | "lt" | "ge" | "le" | "sa" | "eb" | "ap" | "pr" | "po" | "ss" | "sb" | "in" | "ni" | "re"
export const filterOperators: ReadonlyArray<FilterOperator> =
  ["eq", "ne", "co", "sw", "ew", "gt", "lt", "ge", "le", "sa", "eb", "ap", "pr", "po", "ss", "sb", "in", "ni", "re"]

/**
 * A comparison of `_filter` that no parameter, prefix or modifier of plain search expresses: on strings
 * `eq` (the whole value), `ew`, `gt` `lt` `ge` `le`; on numbers and dates `co`; on dates `po`.
 */
export interface FilterCompare {
  readonly kind: "compare"
  readonly code: string
  readonly param: Parameter
  readonly operator: "eq" | "ew" | "gt" | "lt" | "ge" | "le" | "co" | "po"
  readonly value: StringValue | NumberValue | DateValue
}

/**
 * A `_filter` expression (https://hl7.org/fhir/R4/search_filter.html): each test is the criterion its
 * comparison reads as; `and`, `or` and `not` combine them. A comparison plain search cannot say is a
 * `compare`; a path through a reference whose target is itself filtered (`param[filter].rest`), or whose
 * end is a `compare`, is a `chain` over the target types, each with the expression its targets must meet.
 */
export type FilterExpr =
  | { readonly kind: "and" | "or"; readonly operands: ReadonlyArray<FilterExpr> }
  | { readonly kind: "not"; readonly operand: FilterExpr }
  | { readonly kind: "test"; readonly criterion: Criterion }
  | FilterCompare
  | {
    readonly kind: "chain"
    readonly param: SearchParameterDef
    readonly targets: ReadonlyArray<{ readonly type: string; readonly inner: FilterExpr }>
  }

export interface SortKey { readonly code: string; readonly direction: "asc" | "desc"; readonly param: Parameter }

export type Include =
  | { readonly kind: "wildcard"; readonly iterate: boolean }
  | { readonly kind: "parameter"; readonly sourceType: string; readonly param: SearchParameterDef; readonly targetType?: string; readonly iterate: boolean }

export type Summary = "true" | "text" | "data" | "count" | "false"
export type Total = "none" | "estimate" | "accurate"

export interface ResultParams {
  readonly sort: ReadonlyArray<SortKey>
  /** Default 20; more than 1000 is read as 1000. */
  readonly count: number
  readonly offset?: number
  /** `_cursor` as written: where a page of a `next` or `previous` link starts (src/search/plan/cursor.ts). */
  readonly cursor?: string
  readonly total?: Total
  readonly summary?: Summary
  readonly elements?: ReadonlyArray<string>
  readonly include: ReadonlyArray<Include>
  readonly revinclude: ReadonlyArray<Include>
}

export interface SearchRequest {
  readonly type: string
  readonly clauses: ReadonlyArray<Clause>
  /** Chains and `_has`, ANDed with the clauses. */
  readonly links: ReadonlyArray<ChainClause | HasClause>
  /** `_filter` expressions, ANDed with the rest. */
  readonly filters: ReadonlyArray<FilterExpr>
  readonly result: ResultParams
  /** With `lenient`, the parameters set aside, each with the text of its warning. */
  readonly ignored: ReadonlyArray<Problem>
}

/**
 * Why a parameter is refused. `status` 400 for what the client got wrong, 501 for what this server does not
 * do yet; a response with both kinds is a 400.
 */
export interface Problem {
  readonly parameter: string
  readonly value: string
  readonly expected: string
  readonly message: string
  readonly status: 400 | 501
  /** Whether `handling=lenient` may set the parameter aside; a bare id for an any-target parameter, `_revinclude=*` and 501s never are. */
  readonly canSetAside: boolean
}
