/** UTC days, as metering counts and quotas reset by them. */

const dayMillis = 86_400_000

/** The UTC day of `millis`, `YYYY-MM-DD`. */
export const utcDay = (millis: number): string => new Date(millis).toISOString().slice(0, 10)

/**
 * The UTC day of an instant, its text made again only when the instant leaves the last day asked about: a
 * per-request caller pays a comparison, not a date's formatting.
 */
export const dayOfInstant = (): ((millis: number) => string) => {
  let dayStart = 0
  let dayEnd = 0
  let day = ""
  return (millis) => {
    if (millis < dayStart || millis >= dayEnd) {
      dayStart = millis - (((millis % dayMillis) + dayMillis) % dayMillis)
      dayEnd = dayStart + dayMillis
      day = utcDay(dayStart)
    }
    return day
  }
}
