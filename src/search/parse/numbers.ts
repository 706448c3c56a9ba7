/**
 * Prefixes, numbers, quantities and `near`, as search values.
 * https://hl7.org/fhir/R4/search.html#prefix, #number, #quantity, and Location `near`.
 */
import { toCanonical } from "../../terminology/ucum.ts"
import { splitUnescaped, unescape } from "./escape.ts"
import { type NearValue, type Prefix, prefixes, type QuantityValue } from "./SearchRequest.ts"

/** The prefix and the rest of a date, number or quantity value; `eq` when none is written. */
export const readPrefix = (text: string): { readonly prefix: Prefix; readonly rest: string } => {
  const head = text.slice(0, 2)
  const known = prefixes.find((p) => p === head)
  return known === undefined ? { prefix: "eq", rest: text } : { prefix: known, rest: text.slice(2) }
}

const decimal = /^[+-]?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

/**
 * A decimal and the range its significant figures imply: `100` is [99.5, 100.5), `100.00` is
 * [99.995, 100.005), `1e2` is [50, 150) (one significant figure).
 */
export const readDecimal = (text: string): { readonly value: number; readonly low: number; readonly high: number } | undefined => {
  const m = decimal.exec(text)
  if (m === null) return undefined
  const value = Number(text)
  if (!Number.isFinite(value)) return undefined
  const decimals = m[2]?.length ?? 0
  const exponent = m[3] === undefined ? 0 : Number(m[3])
  const half = 0.5 * 10 ** (exponent - decimals)
  return { value, low: value - half, high: value + half }
}

/** `[prefix]number[|system|code]`; an empty system or code is absent. */
export const readQuantity = (text: string): QuantityValue | undefined => {
  const parts = splitUnescaped(text, "|")
  if (parts.length !== 1 && parts.length !== 3) return undefined
  const { prefix, rest } = readPrefix(unescape(parts[0] ?? ""))
  const number = readDecimal(rest)
  if (number === undefined) return undefined
  const system = unescape(parts[1] ?? "")
  const code = unescape(parts[2] ?? "")
  return {
    kind: "quantity",
    prefix,
    ...number,
    ...(system === "" ? {} : { system }),
    ...(code === "" ? {} : { code })
  }
}

/** `latitude|longitude[|distance[|units]]`, latitude in [-90, 90], longitude in [-180, 180], distance >= 0. */
export const readNear = (text: string): NearValue | undefined => {
  const parts = splitUnescaped(text, "|").map(unescape)
  if (parts.length < 2 || parts.length > 4) return undefined
  const [lat, lon, dist, units] = parts.map((p) => p.trim())
  const latitude = readDecimal(lat ?? "")?.value
  const longitude = readDecimal(lon ?? "")?.value
  if (latitude === undefined || longitude === undefined) return undefined
  if (Math.abs(latitude) > 90 || Math.abs(longitude) > 180) return undefined
  const distance = dist === undefined || dist === "" ? undefined : readDecimal(dist)?.value
  if (dist !== undefined && dist !== "" && (distance === undefined || distance < 0)) return undefined
  let meters: number | undefined
  if (distance !== undefined) {
    const canonical = toCanonical(distance, units === undefined || units === "" ? "km" : units)
    if (canonical === undefined || canonical.unit !== "m") return undefined
    meters = canonical.value
  }
  return {
    kind: "near",
    latitude,
    longitude,
    ...(distance === undefined ? {} : { distance }),
    ...(units === undefined || units === "" ? {} : { units }),
    ...(meters === undefined ? {} : { meters })
  }
}
