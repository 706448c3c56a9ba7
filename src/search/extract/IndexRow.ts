/**
 * The index values of one resource for one search parameter, one row per value.
 * https://hl7.org/fhir/R4/search.html#ptypes
 */
export type IndexRow =
  | TokenRow
  | StringRow
  | DateRow
  | NumberRow
  | QuantityRow
  | ReferenceRow
  | UriRow
  | CompositeRow
  | NearRow
  | CompartmentRow

export interface TokenRow {
  readonly kind: "token"
  readonly code: string
  readonly system: string | null
  readonly value: string | null
  /** Coding.display, CodeableConcept.text or Identifier.type.text: what `:text` searches. */
  readonly display?: string | null
  /** The first coding of Identifier.type, for `:of-type`. */
  readonly identifierType?: { readonly system: string | null; readonly code: string }
}

export interface StringRow {
  readonly kind: "string"
  readonly code: string
  /** Lower case, accents removed (NFD without combining marks), whitespace collapsed and trimmed. */
  readonly normalized: string
  readonly exact: string
}

/** `[low, high)` in epoch milliseconds; a dateTime without a timezone is read as UTC. */
export interface DateRow {
  readonly kind: "date"
  readonly code: string
  readonly low: number
  readonly high: number
}

/** `[low, high)`: the range implied by the precision of the value as written. */
export interface NumberRow {
  readonly kind: "number"
  readonly code: string
  readonly value: number
  readonly low: number
  readonly high: number
}

export interface QuantityRow {
  readonly kind: "quantity"
  readonly code: string
  readonly value: number
  readonly system: string | null
  /** Quantity.code, else Quantity.unit. */
  readonly unit: string | null
  /** The value in UCUM base units, when the unit is one the converter knows. */
  readonly canonicalValue?: number
  readonly canonicalUnit?: string
}

export interface ReferenceRow {
  readonly kind: "reference"
  readonly code: string
  /** From a relative `Type/id` (or Reference.type when only an identifier is given). */
  readonly targetType: string | null
  readonly targetId: string | null
  /** An absolute URL or canonical as written, without its `|version`. */
  readonly url: string | null
  readonly version?: string | null
  readonly identifier?: { readonly system: string | null; readonly value: string | null }
}

export interface UriRow {
  readonly kind: "uri"
  readonly code: string
  readonly value: string
}

export interface CompositeRow {
  readonly kind: "composite"
  readonly code: string
  /** One row per component, in the order of SearchParameter.component, taken from the same element. */
  readonly parts: ReadonlyArray<IndexRow>
}

export interface NearRow {
  readonly kind: "near"
  readonly code: string
  readonly latitude: number
  readonly longitude: number
}

/**
 * Membership of a compartment (https://hl7.org/fhir/R4/compartmentdefinition.html): the resource is in
 * `code/targetId`, `code` being the CompartmentDefinition's code. Derived from the reference rows (see
 * `compartments.ts`), not from a search parameter of its own.
 */
export interface CompartmentRow {
  readonly kind: "compartment"
  readonly code: string
  readonly targetId: string
}

/** What a value that could not be indexed is counted under. */
export interface SkippedValue {
  readonly code: string
  readonly reason: string
}

/** Sentinels for the open ends of a Period: the range of an ECMAScript Date, safe integers in any store. */
export const MIN_TIME = -8_640_000_000_000_000
export const MAX_TIME = 8_640_000_000_000_000
