/** Picks a version for a request: exact versions, npm semver ranges, and the `latest`/`current` tags. */
import * as Semver from "semver"

/** An exact version can be served from the cache without asking any source. */
export const isExact = (wanted: string): boolean =>
  wanted !== "latest" && wanted !== "current" && Semver.valid(wanted, { loose: true }) !== null

const highest = (versions: ReadonlyArray<string>): string | undefined =>
  [...versions].filter((v) => Semver.valid(v, { loose: true }) !== null)
    .sort((a, b) => Semver.rcompare(a, b, { loose: true }))[0]

export const pick = (
  available: ReadonlyArray<string>,
  tags: Readonly<Record<string, string>>,
  wanted: string
): string | undefined => {
  if (available.includes(wanted)) return wanted
  const tagged = tags[wanted]
  if (tagged !== undefined && available.includes(tagged)) return tagged
  // FHIR's `current` is a CI build that npm-style registries rarely tag: fall back to the latest release.
  if (wanted === "latest" || wanted === "current") return tags["latest"] ?? highest(available)
  if (Semver.validRange(wanted, { loose: true }) === null) return undefined
  return Semver.maxSatisfying([...available], wanted, { loose: true }) ?? undefined
}
