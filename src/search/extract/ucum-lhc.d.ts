/** The few parts of `@lhncbc/ucum-lhc` (which ships no types) that `ucumLhc.ts` uses. */
declare module "@lhncbc/ucum-lhc" {
  /** A parsed unit: `magnitude_` in base units, `dim_.dimVec_` the exponents of the base units. */
  export interface Unit {
    readonly csCode_: string
    readonly magnitude_: number
    readonly dim_: { readonly dimVec_: ReadonlyArray<number> | null } | null
    /** The exponent of mol; `magnitude_` counts a mole as Avogadro's number of particles. */
    readonly moleExp_: number
    /** An arbitrary unit (`[IU]`, `[arb'U]`): not convertible. */
    readonly isArbitrary_: boolean
    /** A unit on a non-ratio scale (`Cel`, `[pH]`): `cnv_` names the conversion function. */
    readonly isSpecial_: boolean
    readonly cnv_: string | null
  }

  export interface SpecifiedUnit {
    /** `valid` only when the string is the unit's code as written (no substitution was made). */
    readonly status: "valid" | "invalid" | "error"
    readonly unit?: Unit | null
    readonly retMsg: ReadonlyArray<string>
  }

  export class UcumLhcUtils {
    /** A new utilities object; the first call loads the unit definitions. */
    static getInstance(): UcumLhcUtils
    getSpecifiedUnit(unit: string, use: "validate" | "convert", suggest?: boolean): SpecifiedUnit
  }

  export class UnitTables {
    static getInstance(): UnitTables
    readonly dimVecIndexToBaseUnit_: Readonly<Record<number, string>>
    /** 0 until the unit definitions are loaded. */
    unitsCount(): number
  }
}
