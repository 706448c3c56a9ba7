/**
 * Canonical resources by url. When several share a url, the highest `version` wins (a resource without a
 * version ranks lowest), then the last given; every versioned one stays reachable as `url|version`.
 */
import type { CanonicalDef } from "./definitions.ts"

export interface Canonicals<A extends CanonicalDef> {
  /** `url` gives the current one, `url|version` that exact version. */
  readonly get: (reference: string) => A | undefined
  /** The current resource of each url, in the order first given. */
  readonly current: ReadonlyArray<A>
}

const segments = (version: string): ReadonlyArray<string> => version.split(/[.\-+]/)

const numeric = /^\d+$/

/** Compares dotted versions segment by segment, numbers as numbers ("4.0.10" > "4.0.9"). */
export const compareVersions = (a: string | undefined, b: string | undefined): number => {
  if (a === b) return 0
  if (a === undefined) return -1
  if (b === undefined) return 1
  const left = segments(a)
  const right = segments(b)
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const x = left[i]
    const y = right[i]
    if (x === y) continue
    // "1.0.0-ballot" ranks below "1.0.0", "1.0.0.1" above it
    if (x === undefined) return y !== undefined && numeric.test(y) ? -1 : 1
    if (y === undefined) return numeric.test(x) ? 1 : -1
    if (numeric.test(x) && numeric.test(y)) {
      const diff = Number(x) - Number(y)
      if (diff !== 0) return diff < 0 ? -1 : 1
    } else if (numeric.test(x) !== numeric.test(y)) {
      return numeric.test(x) ? 1 : -1
    } else {
      return x < y ? -1 : 1
    }
  }
  return 0
}

export const canonicals = <A extends CanonicalDef>(items: ReadonlyArray<A>): Canonicals<A> => {
  const byUrl = new Map<string, A>()
  const byVersion = new Map<string, A>()
  for (const item of items) {
    const present = byUrl.get(item.url)
    if (present === undefined || compareVersions(item.version, present.version) >= 0) byUrl.set(item.url, item)
    if (item.version !== undefined) byVersion.set(`${item.url}|${item.version}`, item)
  }
  return {
    get: (reference) => (reference.includes("|") ? byVersion.get(reference) : byUrl.get(reference)),
    current: [...byUrl.values()]
  }
}
