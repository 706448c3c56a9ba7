/**
 * What FHIR R4 search says a date or string parameter matches (https://hl7.org/fhir/R4/search.html#date,
 * #string), written out plainly so tests can compute an expected result without the server's index
 * code. Dates are ranges `[low, high)` of epoch milliseconds by the precision written; a dateTime or a
 * query without a timezone is read as UTC (FHIR leaves that to the server; svc reads UTC).
 */

export interface Bounds {
  readonly low: number
  readonly high: number
}

const form = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/

/** The range a FHIR date, dateTime or instant covers, or undefined when `text` is none of them. */
export const dateBounds = (text: unknown): Bounds | undefined => {
  if (typeof text !== "string") return undefined
  const m = form.exec(text)
  if (m === null) return undefined
  const [, year, month, day, hour, minute, second, fraction, zone] = m
  const y = Number(year)
  if (month === undefined) return { low: Date.UTC(y, 0, 1), high: Date.UTC(y + 1, 0, 1) }
  const mo = Number(month) - 1
  if (day === undefined) return { low: Date.UTC(y, mo, 1), high: Date.UTC(y, mo + 1, 1) }
  const d = Number(day)
  if (hour === undefined) return { low: Date.UTC(y, mo, d), high: Date.UTC(y, mo, d + 1) }
  const offsetMinutes = zone === undefined || zone === "Z" ? 0 : (zone.startsWith("-") ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)))
  const millis = fraction === undefined ? 0 : Number(`0.${fraction}`.slice(0, 5)) * 1000
  const low = Date.UTC(y, mo, d, Number(hour), Number(minute), Number(second ?? 0), Math.floor(millis)) - offsetMinutes * 60_000
  const width = second === undefined ? 60_000 : fraction === undefined ? 1000 : 10 ** Math.max(0, 3 - fraction.length)
  return { low, high: low + width }
}

/** A Period's range: from where its start begins to where its end ends, an absent bound open. */
export const periodBounds = (period: { readonly start?: string; readonly end?: string } | undefined): Bounds | undefined => {
  if (period === undefined || (period.start === undefined && period.end === undefined)) return undefined
  return {
    low: period.start === undefined ? -Infinity : dateBounds(period.start)!.low,
    high: period.end === undefined ? Infinity : dateBounds(period.end)!.high
  }
}

/**
 * Whether a target range matches a date search value (`ge2015`, `2015-03`, ...), by R4's table of prefixes:
 * eq the search range contains the target; gt/lt the range above/below the search value overlaps the
 * target; ge/le that or eq; sa/eb the target starts after / ends before the search range.
 */
export const matchesDate = (target: Bounds, value: string): boolean => {
  const prefixed = /^(eq|ne|gt|lt|ge|le|sa|eb)(.*)$/.exec(value)
  const prefix = prefixed?.[1] ?? "eq"
  const q = dateBounds(prefixed?.[2] ?? value)
  if (q === undefined) throw new Error(`not a date search value: ${value}`)
  const within = q.low <= target.low && target.high <= q.high
  switch (prefix) {
    case "eq":
      return within
    case "ne":
      return !within
    case "gt":
      return target.high > q.high
    case "lt":
      return target.low < q.low
    case "ge":
      return target.high > q.high || within
    case "le":
      return target.low < q.low || within
    case "sa":
      return target.low >= q.high
    default:
      return target.high <= q.low
  }
}

/** A string as FHIR string search compares it: accents and case aside. */
export const normalized = (text: string): string => text.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase()
