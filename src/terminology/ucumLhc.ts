/**
 * The UCUM units that the hand table of `ucum.ts` cannot read, read by `@lhncbc/ucum-lhc` (the UCUM
 * library of the U.S. National Library of Medicine, https://ucum.org/ucum): the factor to base units and the
 * exponent of each base unit. The library loads its unit definitions (a JSON of about 230 KB: some 60 ms and
 * 3 MB of heap) when it is first asked, so nothing is loaded until the table misses. (fhirpath's ES module build
 * carries its own copy of the library: the two are not shared.)
 */
import { UcumLhcUtils, UnitTables } from "@lhncbc/ucum-lhc"

/** `value × factor` is the quantity in base units, `dims` their exponents by name (`g`, `m`, `s`, `K`, `mol`, ...). */
export interface BaseUnits {
  readonly factor: number
  readonly dims: Readonly<Record<string, number>>
}

interface Reader {
  readonly utils: UcumLhcUtils
  /** The name of each base unit by its place in a unit's dimension vector. */
  readonly baseUnits: Readonly<Record<number, string>>
  /** The library counts a mole as this many particles; svc keeps mol as its own dimension. */
  readonly molesPerParticle: number
}

let reader: Reader | undefined

const load = (): Reader => {
  if (reader === undefined) {
    const utils = UcumLhcUtils.getInstance()
    const mol = utils.getSpecifiedUnit("mol", "validate", false).unit
    reader = { utils, baseUnits: UnitTables.getInstance().dimVecIndexToBaseUnit_, molesPerParticle: 1 / (mol?.magnitude_ ?? 6.0221367e23) }
  }
  return reader
}

/**
 * Strings the library misreads or fails on, writing to the console: parentheses go around a whole term only
 * (it reads `m(2)` as the number 2; an annotation counts as a term here), and are not empty; an annotation is
 * not followed by a digit.
 */
const misplacedParenthesis = /[^./(]\(|\)[^./)]|\(\)/
const annotations = /\{[^}]*\}/g
const digitAfterAnnotation = /\}\d/
/** Longer strings are no unit anyone writes; they come from requests, so the library is not asked. */
const maxLength = 200

const read = (unit: string): BaseUnits | undefined => {
  // The library trims the string, and writes to the console when it meets blanks.
  if (unit === "" || unit.length > maxLength || /\s/.test(unit)) return undefined
  if (misplacedParenthesis.test(unit.replace(annotations, "a")) || digitAfterAnnotation.test(unit)) return undefined
  const { utils, baseUnits, molesPerParticle } = load()
  let found
  try {
    found = utils.getSpecifiedUnit(unit, "validate", false)
  } catch {
    return undefined
  }
  const u = found.unit
  // `invalid` with a unit is a substitution (`Gauss` read as `G`): the code as written is not UCUM.
  if (found.status !== "valid" || u == null || u.isArbitrary_ || u.isSpecial_ || u.cnv_ !== null) return undefined
  const dims: Record<string, number> = {}
  for (const [i, exponent] of (u.dim_?.dimVec_ ?? []).entries()) {
    if (exponent === 0) continue
    const name = baseUnits[i]
    if (name === undefined) return undefined
    dims[name] = exponent
  }
  if (u.moleExp_ !== 0) dims["mol"] = u.moleExp_
  const factor = u.magnitude_ * molesPerParticle ** u.moleExp_
  return Number.isFinite(factor) && factor > 0 ? { factor, dims } : undefined
}

const known = new Map<string, BaseUnits | null>()
/** At most this many units are remembered, the oldest forgotten first: units come from requests. */
const limit = 1024

/**
 * `unit` in base units as `@lhncbc/ucum-lhc` reads it, or undefined when it is not a UCUM unit, or one that
 * does not convert by a factor (arbitrary units such as `[arb'U]`, non-ratio scales such as `[pH]`). Each
 * unit string is read once (the library's tables are one per process, and so is this memory of them).
 */
export const readWithUcumLhc = (unit: string): BaseUnits | undefined => {
  let result = known.get(unit)
  if (result === undefined) {
    result = read(unit) ?? null
    if (known.size >= limit) known.delete(known.keys().next().value!)
    known.set(unit, result)
  }
  return result ?? undefined
}
