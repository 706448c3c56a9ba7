/**
 * `start <= end` of a Period as FHIRPath compares dates and times (https://hl7.org/fhirpath/N1/#comparison):
 * values with times are compared as instants; otherwise component by component to the precision both
 * have, and when they agree that far but one is more precise, the answer is empty (unknown).
 */

const pattern = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?(Z|[+-]\d{2}:\d{2})?)?)?)?$/

interface Parts {
  /** year, month, day: as many as the value has. */
  readonly date: ReadonlyArray<number>
  /** Milliseconds since the epoch when the value has a time, taking its zone (or UTC when it has none). */
  readonly instant: number | undefined
}

const parse = (text: string): Parts | undefined => {
  const match = pattern.exec(text)
  if (match === null) return undefined
  const date = [match[1], match[2], match[3]].filter((part): part is string => part !== undefined).map(Number)
  if (match[4] === undefined) return { date, instant: undefined }
  const zone = match[7]
  const offset = zone === undefined || zone === "Z" ? 0 : (zone.startsWith("-") ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)))
  const seconds = Number(match[6] ?? "0")
  const instant = Date.UTC(date[0]!, date[1]! - 1, date[2]!, Number(match[4]), Number(match[5]), 0, 0) + seconds * 1000 - offset * 60_000
  return { date, instant }
}

/** true when start <= end, false when not, undefined when FHIRPath cannot tell (or a value does not parse). */
export const comparePeriod = (start: string, end: string): boolean | undefined => {
  const a = parse(start)
  const b = parse(end)
  if (a === undefined || b === undefined) return undefined
  if (a.instant !== undefined && b.instant !== undefined) return a.instant <= b.instant
  const common = Math.min(a.date.length, b.date.length)
  for (let i = 0; i < common; i++) {
    if (a.date[i] !== b.date[i]) return a.date[i]! < b.date[i]!
  }
  const aPrecision = a.instant === undefined ? a.date.length : 4
  const bPrecision = b.instant === undefined ? b.date.length : 4
  return aPrecision === bPrecision ? true : undefined
}
