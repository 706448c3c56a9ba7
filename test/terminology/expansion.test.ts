/**
 * The expansion engine against the real R4 catalog (v3 code systems with their hierarchies, the FHIR code
 * systems with designations, value sets that import others) and against small catalogs made for a case
 * (cycles, a code system larger than the limit, a fragment): each filter operator, imports and excludes,
 * the text filter, activeOnly, designations, displayLanguage, nesting, paging, and every refusal.
 */
import { describe, expect, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import type { Json } from "../../src/catalog/json.ts"
import { expandValueSet, maxCodes, subsumed } from "../../src/terminology/expand.ts"
import { cachedExpansion, defaultOptions, type Entry, expandSource, maxExpansionCodes, type Outcome } from "../../src/terminology/expansion.ts"
import { expansionQuery, type Narrowing, type Target } from "../../src/terminology/expansionQuery.ts"
import { expansionResource, type Layout } from "../../src/terminology/expansionResource.ts"
import { filterRegex } from "../../src/terminology/filterRegex.ts"
import { catalogTests } from "../validation/support.ts"

const withCatalog = catalogTests()

const actCode = "http://terminology.hl7.org/CodeSystem/v3-ActCode"

const inline = (compose: Json, extra: Json = {}): Target => ({
  kind: "resource",
  source: { url: undefined, version: undefined, json: { resourceType: "ValueSet", status: "active", compose, ...extra } }
})

const plain: Narrowing = { filter: undefined, activeOnly: false, excludeNotForUI: false, excludeSystems: [], versions: defaultOptions.versions }

const expanded = (catalog: Catalog, target: Target, narrowing: Partial<Narrowing> = {}): ReadonlyArray<Entry> => {
  const outcome = expansionQuery(catalog, target, { ...plain, ...narrowing })
  if (outcome === undefined || !outcome.ok) throw new Error(`not expanded: ${JSON.stringify(outcome)}`)
  return outcome.entries
}

const codes = (catalog: Catalog, target: Target, narrowing: Partial<Narrowing> = {}): ReadonlyArray<string> =>
  expanded(catalog, target, narrowing).map((entry) => entry.code)

const problems = (outcome: Outcome | undefined) => (outcome === undefined || outcome.ok ? [] : outcome.problems.map((p) => [p.kind, p.message]))

const filtered = (catalog: Catalog, system: string, property: string, op: string, value: string) =>
  codes(catalog, inline({ include: [{ system, filter: [{ property, op, value }] }] }))

const encounterCodes = ["AMB", "EMER", "FLD", "HH", "IMP", "ACUTE", "NONAC", "OBSENC", "PRENC", "SS", "VR"]

describe("filters over a code system's hierarchy (v3 ActCode)", () => {
  withCatalog("is-a takes the code and everything below it; descendent-of leaves the code out", (c) => {
    expect(filtered(c, actCode, "concept", "is-a", "_ActEncounterCode")).toEqual(["_ActEncounterCode", ...encounterCodes])
    expect(filtered(c, actCode, "concept", "descendent-of", "_ActEncounterCode")).toEqual(encounterCodes)
    expect(filtered(c, actCode, "concept", "is-a", "IMP")).toEqual(["IMP", "ACUTE", "NONAC"])
  })

  withCatalog("is-not-a takes every code outside the code's subtree", (c) => {
    const all = codes(c, inline({ include: [{ system: actCode }] }))
    const outside = filtered(c, actCode, "concept", "is-not-a", "_ActEncounterCode")
    expect(outside).toContain("CC")
    expect(outside).not.toContain("AMB")
    expect(outside).not.toContain("_ActEncounterCode")
    expect(outside.length).toBe(all.length - 12)
  })

  withCatalog("generalizes takes the code and everything above it", (c) => {
    expect(filtered(c, actCode, "concept", "generalizes", "ACUTE")).toEqual(expect.arrayContaining(["ACUTE", "IMP", "_ActEncounterCode"]))
    expect(filtered(c, actCode, "concept", "generalizes", "ACUTE")).not.toContain("NONAC")
  })

  withCatalog("=, in and not-in on the concept, regex on the code", (c) => {
    expect(filtered(c, actCode, "concept", "=", "AMB")).toEqual(["AMB"])
    expect(filtered(c, actCode, "code", "in", "VR, AMB,NOPE")).toEqual(["AMB", "VR"])
    const notIn = filtered(c, actCode, "concept", "not-in", "AMB,VR")
    expect(notIn).not.toContain("AMB")
    expect(notIn).toContain("EMER")
    expect(filtered(c, actCode, "code", "regex", "AC[A-Z]TE|NONA.")).toEqual(["ACUTE", "NONAC"])
  })

  withCatalog("properties: =, in, not-in, regex and exists, with inactive read from status", (c) => {
    const retired = filtered(c, actCode, "status", "=", "retired")
    expect(retired).toEqual(expect.arrayContaining(["BOOSTER", "INITIMMUNIZ", "FFS"]))
    expect(retired).not.toContain("IMMUNIZ")
    expect(filtered(c, actCode, "status", "in", "retired,nothing")).toEqual(retired)
    expect(filtered(c, actCode, "status", "not-in", "retired")).not.toContain("BOOSTER")
    expect(filtered(c, actCode, "status", "regex", "ret.*")).toEqual(retired)
    expect(filtered(c, actCode, "inactive", "=", "true")).toEqual(retired)
    const selectors = filtered(c, actCode, "notSelectable", "exists", "true")
    expect(selectors).toContain("_ActEncounterCode")
    expect(selectors).not.toContain("AMB")
    expect(filtered(c, actCode, "display", "=", "ambulatory")).toEqual(["AMB"])
  })

  withCatalog("filters of one include all apply; two includes add up", (c) => {
    expect(codes(c, inline({
      include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "_ActEncounterCode" }, { property: "code", op: "regex", value: "[A-F].*" }] }]
    }))).toEqual(["AMB", "EMER", "FLD", "ACUTE"])
    expect(codes(c, inline({
      include: [{ system: actCode, concept: [{ code: "VR" }] }, { system: actCode, filter: [{ property: "concept", op: "is-a", value: "IMP" }] }]
    }))).toEqual(["VR", "IMP", "ACUTE", "NONAC"])
  })

  withCatalog("an unsupported filter, a regex that is not valid or could run for ever, are refused with the reason", (c) => {
    const refused = (filter: Json) => problems(expansionQuery(c, inline({ include: [{ system: actCode, filter: [filter] }] }), plain))
    expect(refused({ property: "status", op: "is-a", value: "retired" })).toEqual([["unsupported-filter", expect.stringContaining("is-a follows the concept hierarchy")]])
    expect(refused({ property: "concept", op: "exists", value: "true" })).toEqual([["unsupported-filter", expect.stringContaining("the operator 'exists'")]])
    expect(refused({ property: "code", op: "regex", value: "(" })).toEqual([["invalid-filter", expect.stringContaining("is not a valid regular expression")]])
    expect(refused({ property: "code", op: "regex", value: "(A+)+B" })).toEqual([["invalid-filter", expect.stringContaining("a repeated group holds a repetition")]])
    expect(refused({ property: "code", op: "regex", value: "A*B*C*D" })).toEqual([["invalid-filter", expect.stringContaining("more than 2 repetitions")]])
    expect("problem" in filterRegex("(?:AB)*[0-9]{3}")).toBe(false)
  })
})

describe("value sets: imports, excludes, definitions", () => {
  withCatalog("the exclude of v3-ActEncounterCode leaves its grouper out", (c) => {
    expect(codes(c, { kind: "catalog", canonical: "http://terminology.hl7.org/ValueSet/v3-ActEncounterCode" })).toEqual(encounterCodes)
  })

  withCatalog("an imported value set is expanded in place; two imported in one include intersect, in two includes add up", (c) => {
    const event = codes(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/event-resource-types" })
    const request = codes(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/request-resource-types" })
    const union = codes(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/event-or-request-resource-types" })
    expect(new Set(union)).toEqual(new Set([...event, ...request]))
    const both = codes(c, inline({ include: [{ valueSet: ["http://terminology.hl7.org/ValueSet/v3-ActCode", "http://terminology.hl7.org/ValueSet/v3-ActEncounterCode"] }] }))
    expect(both).toEqual(encounterCodes)
    const withSystem = codes(c, inline({
      include: [{ system: actCode, filter: [{ property: "code", op: "regex", value: "[A-H].*" }], valueSet: ["http://terminology.hl7.org/ValueSet/v3-ActEncounterCode"] }]
    }))
    expect(withSystem).toEqual(["AMB", "EMER", "FLD", "HH", "ACUTE"])
    // yesnodontknow: the codes of v2-0136 and one code listed with its own display.
    const answers = expanded(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/yesnodontknow" })
    expect(answers.map((e) => [e.code, e.display])).toEqual([["N", "No"], ["Y", "Yes"], ["asked-unknown", "Don't know"]])
  })

  withCatalog("an import of an unknown value set, and codes of systems the server does not hold, are said", (c) => {
    expect(problems(expansionQuery(c, inline({ include: [{ valueSet: ["http://example.org/ValueSet/none"] }] }), plain)))
      .toEqual([["unknown-value-set", "the ValueSet given imports the ValueSet http://example.org/ValueSet/none, which is not known to this server"]])
    expect(problems(cachedExpansion(c, "http://hl7.org/fhir/ValueSet/observation-codes") as Outcome))
      .toEqual([["unknown-code-system", "the ValueSet http://hl7.org/fhir/ValueSet/observation-codes needs the code system http://loinc.org, which this server does not hold"]])
    expect(problems(cachedExpansion(c, "http://hl7.org/fhir/ValueSet/body-site") as Outcome))
      .toEqual([["no-content", "the ValueSet http://hl7.org/fhir/ValueSet/body-site needs the codes of http://snomed.info/sct, which this server holds without its content (content 'not-present')"]])
    expect(problems(cachedExpansion(c, "http://hl7.org/fhir/ValueSet/service-category") as Outcome)[0]?.[1]).toContain("(content 'example')")
    // Listed codes of a system not held are taken as listed, and the expansion says so.
    const listed = expansionQuery(c, inline({ include: [{ system: "http://loinc.org", concept: [{ code: "8867-4", display: "Heart rate" }] }] }), plain)
    expect(listed?.ok && listed.entries.map((e) => [e.code, e.display])).toEqual([["8867-4", "Heart rate"]])
    expect(listed?.ok && listed.notes.map((n) => n.kind)).toEqual(["unverified"])
  })

  withCatalog("a fragment code system is expanded as held, with a note", (c) => {
    const outcome = cachedExpansion(c, "http://hl7.org/fhir/ValueSet/insuranceplan-type") as Outcome
    expect(outcome.ok && outcome.entries.length).toBeGreaterThan(0)
    expect(outcome.ok && outcome.notes.map((n) => n.kind)).toEqual(["fragment"])
  })

  withCatalog("the reasons are collected, not only the first", (c) => {
    const outcome = expansionQuery(c, inline({
      include: [
        { system: "http://snomed.info/sct", filter: [{ property: "concept", op: "is-a", value: "123037004" }] },
        { system: "http://example.org/none" },
        { system: actCode, filter: [{ property: "concept", op: "subsumes", value: "IMP" }] }
      ]
    }), plain)
    expect(problems(outcome).map(([kind]) => kind)).toEqual(["no-content", "unknown-code-system", "unsupported-filter"])
  })

  withCatalog("a code system's own value set (CodeSystem.valueSet) is known by that url", (c) => {
    // The catalog has a ValueSet for resource-types; the implicit one of a code system stands in when none exists.
    const small = build([
      { resourceType: "CodeSystem", url: "http://example.org/cs", valueSet: "http://example.org/vs-all", status: "active", content: "complete", concept: [{ code: "a" }, { code: "b" }] }
    ], 1)
    expect(codes(small, { kind: "catalog", canonical: "http://example.org/vs-all" })).toEqual(["a", "b"])
    expect(codes(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/resource-types" })).toContain("Observation")
  })
})

describe("cycles, limits and fragments on small catalogs", () => {
  const system = (url: string, count: number, extra: Json = {}) => ({
    resourceType: "CodeSystem", url, status: "active", content: "complete", ...extra,
    concept: Array.from({ length: count }, (_, i) => ({ code: `c${i}`, display: `${i % 2 === 0 ? "Even" : "Odd"} concept number ${i}` }))
  })
  const valueSet = (url: string, compose: Json) => ({ resourceType: "ValueSet", url, status: "active", compose })

  const cyclic = build([
    system("http://example.org/cs", 3),
    valueSet("http://example.org/a", { include: [{ valueSet: ["http://example.org/b"] }] }),
    valueSet("http://example.org/b", { include: [{ system: "http://example.org/cs" }, { valueSet: ["http://example.org/a"] }] })
  ], 1)

  it("an import cycle is refused", () => {
    expect(problems(cachedExpansion(cyclic, "http://example.org/a") as Outcome).map(([kind]) => kind)).toContain("cycle")
    expect(expandValueSet(cyclic, "http://example.org/b")).toEqual({ problem: expect.stringContaining("imports") })
  })

  const huge = build([
    system("http://example.org/huge", maxExpansionCodes + 5),
    valueSet("http://example.org/huge-all", { include: [{ system: "http://example.org/huge" }] })
  ], 1)

  it("more codes than the limit is too costly; a filter that narrows it below the limit works, before the codes are made", () => {
    const whole = expansionQuery(huge, { kind: "catalog", canonical: "http://example.org/huge-all" }, plain)
    expect(problems(whole)).toEqual([["too-costly", `the expansion of the ValueSet http://example.org/huge-all has more than ${maxExpansionCodes} codes`]])
    expect(codes(huge, { kind: "catalog", canonical: "http://example.org/huge-all" }, { filter: "number 100004" })).toEqual(["c100004"])
    expect(codes(huge, { kind: "catalog", canonical: "http://example.org/huge-all" }, { filter: "odd number 1000" }))
      .toEqual(["c10001", "c10003", "c10005", "c10007", "c10009", "c100001", "c100003"])
    expect(problems(expansionQuery(huge, { kind: "catalog", canonical: "http://example.org/huge-all" }, { ...plain, filter: "concept" })).map(([kind]) => kind)).toEqual(["too-costly"])
    expect(expandValueSet(huge, "http://example.org/huge-all")).toEqual({ problem: expect.stringContaining("more than") })
  })

  it("search's :in keeps its own limit of 10,000 codes", () => {
    const mid = build([system("http://example.org/mid", maxCodes + 1), valueSet("http://example.org/mid-all", { include: [{ system: "http://example.org/mid" }] })], 1)
    expect(expandValueSet(mid, "http://example.org/mid-all")).toEqual({ problem: `the ValueSet http://example.org/mid-all has more than ${maxCodes} codes` })
    expect(codes(mid, { kind: "catalog", canonical: "http://example.org/mid-all" }).length).toBe(maxCodes + 1)
  })
})

const layout = (overrides: Partial<Layout> = {}): Layout => ({
  count: undefined, offset: 0, nested: false, includeDesignations: false, designations: [], displayLanguage: undefined,
  includeDefinition: false, parameters: [], identifier: "urn:uuid:00000000-0000-4000-8000-000000000000", timestamp: "2024-01-01T00:00:00Z", ...overrides
})

const answer = (catalog: Catalog, canonical: string, overrides: Partial<Layout> = {}, narrowing: Partial<Narrowing> = {}): any => {
  const outcome = expansionQuery(catalog, { kind: "catalog", canonical }, { ...plain, ...narrowing })
  if (outcome === undefined || !outcome.ok) throw new Error("not expanded")
  const source = catalog.valueSet(canonical)!.resource
  return expansionResource(catalog, source, undefined, outcome.entries, outcome.used, layout(overrides))
}

describe("what $expand shows of an expansion", () => {
  const encounter = "http://terminology.hl7.org/ValueSet/v3-ActEncounterCode"

  withCatalog("the text filter keeps codes where each word starts a word of the display, a designation or the code", (c) => {
    expect(codes(c, { kind: "catalog", canonical: encounter }, { filter: "inpatient" })).toEqual(["IMP", "ACUTE", "NONAC"])
    expect(codes(c, { kind: "catalog", canonical: encounter }, { filter: "NON inp" })).toEqual(["NONAC"])
    expect(codes(c, { kind: "catalog", canonical: encounter }, { filter: "patient" })).toEqual([])
    expect(codes(c, { kind: "catalog", canonical: encounter }, { filter: "  " })).toEqual(encounterCodes)
    expect(codes(c, { kind: "catalog", canonical: encounter }, { filter: "vr" })).toEqual(["VR"])
    // A designation in another language is matched too; accents aside.
    expect(codes(c, { kind: "catalog", canonical: "http://hl7.org/fhir/ValueSet/resource-types" }, { filter: "cuenta" })).toEqual(["Account"])
    expect(codes(c, inline({ include: [{ system: actCode, concept: [{ code: "AMB", display: "Ambulância" }] }] }), { filter: "ambulancia" })).toEqual(["AMB"])
  })

  withCatalog("inactive codes are flagged, and activeOnly leaves them out; excludeNotForUI leaves abstract ones out", (c) => {
    const immunization = inline({ include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "IMMUNIZ" }] }] })
    expect(expanded(c, immunization).map((e) => [e.code, e.inactive])).toEqual([["IMMUNIZ", false], ["BOOSTER", true], ["INITIMMUNIZ", true]])
    expect(codes(c, immunization, { activeOnly: true })).toEqual(["IMMUNIZ"])
    const encounters = inline({ include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "_ActEncounterCode" }] }] })
    expect(expanded(c, encounters)[0]).toMatchObject({ code: "_ActEncounterCode", abstract: true })
    expect(codes(c, encounters, { excludeNotForUI: true })).toEqual(encounterCodes)
    expect(codes(c, inline({ inactive: false, include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "IMMUNIZ" }] }] }))).toEqual(["IMMUNIZ"])
  })

  withCatalog("the answer: metadata of the source, identifier, timestamp, total, contains with system, version, code, display", (c) => {
    const result = answer(c, encounter)
    expect(result).toMatchObject({ resourceType: "ValueSet", url: encounter, version: "2014-03-26", name: "v3.ActEncounterCode", status: "active" })
    expect(result.compose).toBeUndefined()
    expect(result.text).toBeUndefined()
    expect(result.expansion).toMatchObject({ identifier: expect.stringMatching(/^urn:uuid:/), timestamp: "2024-01-01T00:00:00Z", total: 11 })
    expect(result.expansion.offset).toBeUndefined()
    expect(result.expansion.contains[0]).toEqual({ system: actCode, version: "2018-08-12", code: "AMB", display: "ambulatory" })
    expect(result.expansion.parameter).toEqual([{ name: "used-codesystem", valueUri: `${actCode}|2018-08-12` }])
    expect(answer(c, encounter, { includeDefinition: true }).compose.exclude).toHaveLength(1)
  })

  withCatalog("count and offset page a flat expansion; count=0 gives the total alone", (c) => {
    const page = answer(c, encounter, { count: 3, offset: 4 })
    expect(page.expansion.total).toBe(11)
    expect(page.expansion.offset).toBe(4)
    expect(page.expansion.contains.map((item: any) => item.code)).toEqual(["IMP", "ACUTE", "NONAC"])
    const past = answer(c, encounter, { count: 3, offset: 20 })
    expect([past.expansion.total, past.expansion.contains]).toEqual([11, undefined])
    expect(answer(c, encounter, { count: 0 }).expansion.contains).toBeUndefined()
  })

  withCatalog("excludeNested=false nests codes under their nearest ancestor in the expansion; abstract codes are flagged", (c) => {
    // R4: paging applies to flat expansions only, but count=0 still asks for the total alone.
    const counted = answer(c, encounter, { nested: true, count: 0 }).expansion
    expect([counted.total, counted.contains]).toEqual([11, undefined])
    const whole = answer(c, encounter, { nested: true, count: 2, offset: 1 }).expansion
    expect([whole.total, whole.offset]).toEqual([11, undefined])
    const tree = whole.contains
    expect(tree.map((item: any) => item.code)).toEqual(["AMB", "EMER", "FLD", "HH", "IMP", "OBSENC", "PRENC", "SS", "VR"])
    expect(tree[4].contains.map((item: any) => item.code)).toEqual(["ACUTE", "NONAC"])
    const withGrouper = expansionQuery(c, inline({ include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "_ActEncounterCode" }] }] }), plain)
    const grouped = expansionResource(c, { resourceType: "ValueSet", status: "draft" }, undefined, withGrouper?.ok === true ? withGrouper.entries : [], [], layout({ nested: true }))
    expect(grouped.expansion).toMatchObject({ total: 12, contains: [{ code: "_ActEncounterCode", abstract: true }] })
    expect((grouped.expansion as any).contains[0].contains).toHaveLength(9)
  })

  withCatalog("designations when asked (all, or by language or use), and displayLanguage picks the display", (c) => {
    const types = "http://hl7.org/fhir/ValueSet/resource-types"
    const account = (overrides: Partial<Layout>) => answer(c, types, overrides, { filter: "account" }).expansion.contains[0]
    expect(account({}).designation).toBeUndefined()
    expect(account({ includeDesignations: true }).designation.map((d: any) => d.language)).toEqual(expect.arrayContaining(["en", "es", "zh"]))
    expect(account({ designations: [{ system: "urn:ietf:bcp:47", code: "es" }] }).designation).toEqual([
      { language: "es", use: { system: "http://terminology.hl7.org/CodeSystem/designation-usage", code: "display" }, value: "Cuenta" }
    ])
    expect(account({ displayLanguage: "es" }).display).toBe("Cuenta")
    expect(account({ displayLanguage: "es-MX" }).display).toBe("Cuenta")
    expect(account({ displayLanguage: "fr" }).display).toBe("Account")
  })

  withCatalog("version rules: force-system-version and system-version must name a version held; check-system-version refuses another", (c) => {
    const held = (rule: Partial<Narrowing["versions"]>) =>
      expansionQuery(c, { kind: "catalog", canonical: encounter }, { ...plain, versions: { ...plain.versions, ...rule } })
    expect(held({ force: new Map([[actCode, "2018-08-12"]]) })?.ok).toBe(true)
    expect(problems(held({ force: new Map([[actCode, "1.0"]]) }))).toEqual([["unknown-code-system", `version 1.0 of ${actCode} was asked for; this server holds version 2018-08-12`]])
    expect(problems(held({ system: new Map([[actCode, "1.0"]]) })).map(([kind]) => kind)).toEqual(["unknown-code-system"])
    const checked = expansionQuery(c, inline({ include: [{ system: actCode, version: "2018-08-12", concept: [{ code: "AMB" }] }] }), { ...plain, versions: { ...plain.versions, check: new Map([[actCode, "9"]]) } })
    expect(problems(checked).map(([kind]) => kind)).toEqual(["version-conflict"])
    // A version a value set names that is not held reads the held one, with a note.
    const older = expansionQuery(c, inline({ include: [{ system: actCode, version: "1.0", concept: [{ code: "AMB" }] }] }), plain)
    expect(older?.ok && older.notes.map((n) => n.kind)).toEqual(["version-not-held"])
    expect(older?.ok && older.entries[0]?.version).toBe("2018-08-12")
  })
})

describe("membership for search and validation, on the same engine", () => {
  withCatalog("expandValueSet answers the pairs, or the reason", (c) => {
    const gender = expandValueSet(c, "http://hl7.org/fhir/ValueSet/administrative-gender")
    expect(gender).toEqual({ codes: ["male", "female", "other", "unknown"].map((code) => ({ system: "http://hl7.org/fhir/administrative-gender", code })) })
    expect(expandValueSet(c, "http://hl7.org/fhir/ValueSet/administrative-gender|9.9")).toEqual(gender)
    expect(expandValueSet(c, "http://example.org/none")).toEqual({ problem: "the ValueSet http://example.org/none is not known to this server" })
    expect(expandValueSet(c, "http://hl7.org/fhir/ValueSet/body-site")).toEqual({ problem: expect.stringContaining("content 'not-present'") })
  })

  withCatalog("subsumed follows the hierarchy both ways and refuses codes and systems it cannot know", (c) => {
    const below = subsumed(c, actCode, "IMP", "below")
    expect("codes" in below && below.codes.map((code) => code.code)).toEqual(["IMP", "NONAC", "ACUTE"])
    const above = subsumed(c, actCode, "ACUTE", "above")
    expect("codes" in above && above.codes.map((code) => code.code)).toEqual(expect.arrayContaining(["ACUTE", "IMP", "_ActEncounterCode"]))
    expect(subsumed(c, actCode, "NOPE", "below")).toEqual({ problem: `the code system ${actCode} has no code 'NOPE'` })
    expect(subsumed(c, "http://snomed.info/sct", "123037004", "below")).toEqual({ problem: expect.stringContaining("without its content") })
  })

  withCatalog("expandSource with the default options equals the catalog's kept expansion", (c) => {
    const canonical = "http://terminology.hl7.org/ValueSet/v3-ActEncounterCode"
    const fresh = expandSource(c, { url: canonical, version: undefined, json: c.valueSet(canonical)!.resource }, defaultOptions)
    const kept = cachedExpansion(c, canonical) as Outcome
    expect(fresh.ok && fresh.entries).toEqual(kept.ok && kept.entries)
  })
})
