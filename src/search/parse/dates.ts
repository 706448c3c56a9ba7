/**
 * FHIR date, dateTime and instant search values as a half-open range in epoch ms.
 * https://hl7.org/fhir/R4/search.html#date and https://hl7.org/fhir/R4/datatypes.html#dateTime
 * A value without a timezone is read as UTC; a day, month or year is a UTC day, month or year.
 */
import type { DatePrecision } from "./SearchRequest.ts"

export interface DateRange { readonly low: number; readonly high: number; readonly precision: DatePrecision }

// YYYY[-MM[-DD[Thh:mm[:ss[.f+]][Z|±hh:mm]]]]; a space stands for "+" left unencoded in a query string.
const pattern =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+\- ](\d{2}):(\d{2}))?)?)?)?$/

const minute = 60_000
const day = 86_400_000

export const readDate = (text: string): DateRange | undefined => {
  const m = pattern.exec(text)
  if (m === null) return undefined
  const [, y, mo, d, h, mi, s, fraction, zone, zh, zm] = m
  const year = Number(y)
  const month = mo === undefined ? 1 : Number(mo)
  const date = d === undefined ? 1 : Number(d)
  const hour = h === undefined ? 0 : Number(h)
  const min = mi === undefined ? 0 : Number(mi)
  const sec = s === undefined ? 0 : Number(s)
  if (year < 1 || month < 1 || month > 12 || date < 1 || hour > 23 || min > 59 || sec > 59) return undefined
  const millis = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, "0"))
  // Date.UTC reads years 0-99 as 1900-1999: shift by 400 years, which are exactly 146097 days.
  const shift = year < 100 ? 400 : 0
  const local = Date.UTC(year + shift, month - 1, date, hour, min, sec, millis) - (shift === 0 ? 0 : 146_097 * day)
  if (date > daysInMonth(year, month)) return undefined
  let offset = 0
  if (zone !== undefined && zone !== "Z") {
    const hours = Number(zh)
    const minutes = Number(zm)
    if (hours > 14 || minutes > 59) return undefined
    offset = (zone.startsWith("-") ? -1 : 1) * (hours * 60 + minutes) * minute
  }
  const low = local - offset
  if (mo === undefined) return { low, high: low + daysInYear(year) * day, precision: "year" }
  if (d === undefined) return { low, high: low + daysInMonth(year, month) * day, precision: "month" }
  if (h === undefined) return { low, high: low + day, precision: "day" }
  if (s === undefined) return { low, high: low + minute, precision: "minute" }
  if (fraction === undefined) return { low, high: low + 1000, precision: "second" }
  return { low, high: low + (fraction.length >= 3 ? 1 : 10 ** (3 - fraction.length)), precision: "millisecond" }
}

const isLeap = (year: number): boolean => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
const daysInYear = (year: number): number => (isLeap(year) ? 366 : 365)
const daysInMonth = (year: number, month: number): number =>
  month === 2 ? (isLeap(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31
