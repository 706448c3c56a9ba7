import { UnitTables } from "@lhncbc/ucum-lhc"
import { describe, expect, it } from "vitest"
import { canonicalizer, toCanonical } from "../../../src/terminology/ucum.ts"
import { readWithUcumLhc } from "../../../src/terminology/ucumLhc.ts"

/** The units of the hand table this file reads; each is also a UCUM unit the library knows. */
const tableUnits = ["mg", "kg", "[in_i]", "[ft_i]", "[mi_i]", "[lb_av]", "[oz_av]", "mL", "dL", "h", "wk", "a", "mg/dL", "mmol/L", "kg/m2", "10*3/uL", "{breaths}/min", "kPa", "%"]

describe("UCUM units in base units", () => {
  // First in the file: each test file runs in its own process, so the library is not loaded yet.
  it("loads the UCUM library only when the table cannot read a unit", () => {
    for (const unit of tableUnits) expect(toCanonical(1, unit)).toBeDefined()
    expect(UnitTables.getInstance().unitsCount()).toBe(0)
    expect(toCanonical(1, "[stone_av]")).toBeDefined()
    expect(UnitTables.getInstance().unitsCount()).toBeGreaterThan(0)
  })

  it("reads the table's units as before", () => {
    expect(toCanonical(90, "mg/dL")).toEqual({ value: 900, unit: "g.m-3" })
    expect(toCanonical(5.4, "mmol/L")).toEqual({ value: 5.4, unit: "m-3.mol" })
    expect(toCanonical(150, "[lb_av]")).toEqual({ value: 68038.8555, unit: "g" })
    expect(toCanonical(4.5, "10*3/uL")).toEqual({ value: 4.5e12, unit: "m-3" })
    expect(toCanonical(1, "mm[Hg]")).toEqual({ value: 133322.387415, unit: "g.m-1.s-2" })
    expect(toCanonical(37, "Cel")).toEqual({ value: 37, unit: "Cel" })
    expect(toCanonical(98.6, "[degF]")).toEqual({ value: 98.6, unit: "[degF]" })
  })

  it("reads units only the UCUM library knows, in the same base units as the table", () => {
    expect(toCanonical(11, "[stone_av]")).toEqual({ value: 69853.22498, unit: "g" })
    expect(toCanonical(1, "[gr]")).toEqual({ value: 0.06479891, unit: "g" })
    expect(toCanonical(2, "t")).toEqual({ value: 2e6, unit: "g" })
    expect(toCanonical(1, "[pt_us]")).toEqual({ value: 0.000473176473, unit: "m3" })
    expect(toCanonical(140, "meq/L")).toEqual(toCanonical(140, "mmol/L"))
    expect(toCanonical(60, "U/L")).toEqual({ value: 0.001, unit: "m-3.s-1.mol" })
    expect(toCanonical(1, "[psi]")?.unit).toBe(toCanonical(1, "mm[Hg]")?.unit)
    expect(toCanonical(1, "cm[H2O]")).toEqual({ value: 98066.5, unit: "g.m-1.s-2" })
    expect(toCanonical(6, "mL/(kg.min)")).toEqual({ value: 1e-10, unit: "g-1.m3.s-1" })
    expect(toCanonical(1, "cal")).toEqual({ value: 4184, unit: "g.m2.s-2" })
    expect(toCanonical(2, "cd")).toEqual({ value: 2, unit: "cd" })
    expect(toCanonical(180, "deg")).toEqual({ value: 3.14159265359, unit: "rad" })
  })

  it("agrees with the UCUM library on every unit the table reads", () => {
    for (const unit of tableUnits) {
      const table = toCanonical(1, unit)!
      const library = readWithUcumLhc(unit)!
      const name = Object.entries(library.dims).map(([d, e]) => (e === 1 ? d : `${d}${e}`))
      expect(table.unit.split(".").filter((d) => d !== "1").sort(), unit).toEqual(name.sort())
      expect(table.value / library.factor, unit).toBeCloseTo(1, 10)
    }
  })

  it("answers undefined for what is not a UCUM unit or does not convert by a factor", () => {
    for (const unit of ["", "furlong", "kg m", " kg", "Gauss", "m(2)", "mg/", "{a", "((", "()", "{4}9", "{a}(m)", "[pH]", "[arb'U]", "[arb'U]/mL", "mCel", "Cel/h", "x".repeat(300)]) {
      expect(toCanonical(1, unit), JSON.stringify(unit)).toBeUndefined()
    }
  })

  it("remembers units in the canonicalizer, whichever reader found them", () => {
    const canonical = canonicalizer(2)
    expect(canonical(2, "[stone_av]")).toEqual({ value: 12700.58636, unit: "g" })
    expect(canonical(3, "[stone_av]")).toEqual({ value: 19050.87954, unit: "g" })
    expect(canonical(1, "furlong")).toBeUndefined()
    expect(canonical(5, "mg")).toEqual({ value: 0.005, unit: "g" })
  })
})
