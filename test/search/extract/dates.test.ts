import { describe, expect, it } from "vitest"
import { dateRange, periodRange } from "../../../src/search/extract/dates.ts"
import { MAX_TIME, MIN_TIME } from "../../../src/search/extract/IndexRow.ts"
import { toCanonical } from "../../../src/terminology/ucum.ts"

describe("date ranges by precision", () => {
  it("covers the whole year, month or day written", () => {
    expect(dateRange("2020")).toEqual({ low: Date.UTC(2020, 0, 1), high: Date.UTC(2021, 0, 1) })
    expect(dateRange("2020-02")).toEqual({ low: Date.UTC(2020, 1, 1), high: Date.UTC(2020, 2, 1) })
    expect(dateRange("2020-02-29")).toEqual({ low: Date.UTC(2020, 1, 29), high: Date.UTC(2020, 2, 1) })
  })

  it("reads a dateTime without timezone as UTC and applies an offset", () => {
    expect(dateRange("2020-01-01T10:00:00")).toEqual({ low: Date.UTC(2020, 0, 1, 10), high: Date.UTC(2020, 0, 1, 10, 0, 1) })
    expect(dateRange("2020-01-01T10:00:00+02:00")?.low).toBe(Date.UTC(2020, 0, 1, 8))
    expect(dateRange("2020-01-01T10:00:00.123Z")).toEqual({ low: Date.UTC(2020, 0, 1, 10, 0, 0, 123), high: Date.UTC(2020, 0, 1, 10, 0, 0, 124) })
  })

  it("rejects malformed dates", () => {
    for (const bad of ["2021-02-29", "2020-13", "yesterday", "2020-01-01T25:00:00Z", ""]) expect(dateRange(bad)).toBeUndefined()
  })

  it("leaves the open end of a Period at a sentinel", () => {
    expect(periodRange("2020-01-01", undefined)).toEqual({ low: Date.UTC(2020, 0, 1), high: MAX_TIME })
    expect(periodRange(undefined, "2020-01-01")).toEqual({ low: MIN_TIME, high: Date.UTC(2020, 0, 2) })
    expect(periodRange("nope", undefined)).toBeUndefined()
  })
})

describe("UCUM canonical units", () => {
  it("converts mass, length, volume, time and pressure to base units", () => {
    expect(toCanonical(5, "mg")).toEqual({ value: 0.005, unit: "g" })
    expect(toCanonical(2, "kg")).toEqual({ value: 2000, unit: "g" })
    expect(toCanonical(3, "ug")).toEqual({ value: 0.000003, unit: "g" })
    expect(toCanonical(1, "[in_i]")).toEqual({ value: 0.0254, unit: "m" })
    expect(toCanonical(1, "km")).toEqual({ value: 1000, unit: "m" })
    expect(toCanonical(250, "mL")).toEqual({ value: 0.00025, unit: "m3" })
    expect(toCanonical(1, "dL")).toEqual({ value: 0.0001, unit: "m3" })
    expect(toCanonical(2, "h")).toEqual({ value: 7200, unit: "s" })
    expect(toCanonical(1, "wk")).toEqual({ value: 604800, unit: "s" })
    expect(toCanonical(1, "a")).toEqual({ value: 31557600, unit: "s" })
    expect(toCanonical(1, "mm[Hg]")).toEqual({ value: 133322.387415, unit: "g.m-1.s-2" })
  })

  it("reads quotients and annotations, leaves temperatures and unknown units", () => {
    expect(toCanonical(90, "mg/dL")).toEqual({ value: 900, unit: "g.m-3" })
    expect(toCanonical(12, "{breaths}/min")).toEqual({ value: 0.2, unit: "s-1" })
    expect(toCanonical(37, "Cel")).toEqual({ value: 37, unit: "Cel" })
    expect(toCanonical(1, "furlong")).toBeUndefined()
  })
})
