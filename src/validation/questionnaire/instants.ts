/**
 * Dates and times, compared by the instant each starts at (a year is its first day), as the reference
 * validator compares them.
 */

const dateTimePattern = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/

export const instantOf = (value: string): number | undefined => {
  const m = dateTimePattern.exec(value)
  if (m === null) return undefined
  const zone = m[8]
  const offset = zone === undefined || zone === "Z" ? 0 : (zone.startsWith("-") ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)))
  const ms = m[7] === undefined ? 0 : Math.round(Number(m[7]) * 1000)
  return Date.UTC(Number(m[1]), Number(m[2] ?? "1") - 1, Number(m[3] ?? "1"), Number(m[4] ?? "0"), Number(m[5] ?? "0"), Number(m[6] ?? "0"), ms) - offset * 60_000
}
