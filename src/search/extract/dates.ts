/**
 * FHIR date, dateTime and instant text to `[low, high)` epoch milliseconds, by the precision written.
 * https://hl7.org/fhir/R4/search.html#date and https://hl7.org/fhir/R4/datatypes.html#dateTime
 * A dateTime without a timezone is read as UTC (the spec leaves it to the server).
 */
import { MAX_TIME, MIN_TIME } from "./IndexRow.ts"

export interface Range {
  readonly low: number
  readonly high: number
}

const pattern =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/

const daysIn = (year: number, month: number): number =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/** The range the text covers, or undefined when it is not a FHIR date, dateTime or instant. */
export const dateRange = (text: string): Range | undefined => {
  const m = pattern.exec(text.trim())
  if (m === null) return undefined
  const year = Number(m[1])
  const month = m[2] === undefined ? undefined : Number(m[2])
  const day = m[3] === undefined ? undefined : Number(m[3])
  if (month === undefined) return { low: Date.UTC(year, 0, 1), high: Date.UTC(year + 1, 0, 1) }
  if (month < 1 || month > 12) return undefined
  if (day === undefined) return { low: Date.UTC(year, month - 1, 1), high: Date.UTC(year, month, 1) }
  if (day < 1 || day > daysIn(year, month)) return undefined
  if (m[4] === undefined) return { low: Date.UTC(year, month - 1, day), high: Date.UTC(year, month - 1, day + 1) }
  const hour = Number(m[4])
  const minute = Number(m[5])
  const second = m[6] === undefined ? 0 : Number(m[6])
  if (hour > 24 || minute > 59 || second > 60 || (hour === 24 && (minute > 0 || second > 0))) return undefined
  const fraction = m[7] ?? ""
  const millis = fraction === "" ? 0 : Math.floor(Number(`0.${fraction}`) * 1000)
  const offset = zoneOffset(m[8])
  if (offset === undefined) return undefined
  const low = Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59), millis) - offset
  const width = m[6] === undefined ? 60_000 : fraction === "" ? 1000 : Math.max(1, 10 ** (3 - fraction.length))
  return { low, high: low + width }
}

/** The offset of a zone in milliseconds; none is UTC. */
const zoneOffset = (zone: string | undefined): number | undefined => {
  if (zone === undefined || zone === "Z") return 0
  const hours = Number(zone.slice(1, 3))
  const minutes = Number(zone.slice(4, 6))
  if (hours > 14 || minutes > 59) return undefined
  return (zone[0] === "-" ? -1 : 1) * (hours * 60 + minutes) * 60_000
}

/** A Period: start..end, an absent end open. Undefined when a present bound is malformed or both are absent. */
export const periodRange = (start: unknown, end: unknown): Range | undefined => {
  if (start === undefined && end === undefined) return undefined
  const from = start === undefined ? undefined : typeof start === "string" ? dateRange(start) : undefined
  const to = end === undefined ? undefined : typeof end === "string" ? dateRange(end) : undefined
  if ((start !== undefined && from === undefined) || (end !== undefined && to === undefined)) return undefined
  return { low: from?.low ?? MIN_TIME, high: to?.high ?? MAX_TIME }
}

/** The smallest range covering all of `ranges`, or undefined when there are none. */
export const cover = (ranges: ReadonlyArray<Range>): Range | undefined => {
  if (ranges.length === 0) return undefined
  let low = MAX_TIME
  let high = MIN_TIME
  for (const range of ranges) {
    if (range.low < low) low = range.low
    if (range.high > high) high = range.high
  }
  return { low, high }
}
