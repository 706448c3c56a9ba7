/**
 * The terminology operations' answers on the real R4 catalog, without a server: what `$lookup` says of a
 * concept, how `$subsumes` reads a hierarchy, `$validate-code`'s verdicts, `$translate` through the R4
 * ConceptMaps, and the ConceptMaps the catalog compiles.
 */
import { expect } from "vitest"
import { Effect, Either } from "effect"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { conceptOf, heldCodeSystem } from "../../src/terminology/heldCodeSystem.ts"
import { lookupAnswer } from "../../src/terminology/lookup.ts"
import { subsumption } from "../../src/terminology/subsumes.ts"
import { translate, type TranslateQuery } from "../../src/terminology/translate.ts"
import { codingInCodeSystem, codingInValueSet, combine, type CodingInput, messageOf } from "../../src/terminology/validateCode.ts"
import { catalogTests } from "../validation/support.ts"

const test = catalogTests()

const gender = "http://hl7.org/fhir/administrative-gender"
const genderValueSet = "http://hl7.org/fhir/ValueSet/administrative-gender"
const actCode = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
const v2Sex = "http://terminology.hl7.org/CodeSystem/v2-0001"

const held = (catalog: Catalog, system: string) => Effect.runSync(heldCodeSystem(catalog, system, undefined, "look it up"))

/** The failure's status and diagnostics, or "answered". */
const refusal = <A>(effect: Effect.Effect<A, { readonly status?: number | undefined; readonly code: string; readonly diagnostics: string }>) => {
  const result = Effect.runSync(Effect.either(effect))
  return Either.isLeft(result) ? `${result.left.status ?? result.left.code}: ${result.left.diagnostics}` : "answered"
}

const lookup = (catalog: Catalog, system: string, code: string, options: { displayLanguage?: string; properties?: ReadonlyArray<string> } = {}) => {
  const codeSystem = held(catalog, system)
  const concept = Effect.runSync(conceptOf(codeSystem, code))
  return lookupAnswer(codeSystem.codeSystem, concept, { displayLanguage: options.displayLanguage, properties: options.properties ?? [] }).parameter
}

const options = { abstractAllowed: false, displayLanguage: undefined }

const inGender = (catalog: Catalog, coding: CodingInput) => combine([codingInValueSet(catalog, genderValueSet, genderValueSet, coding, options, "Coding")])

const forward = (system: string, code: string, extra: Partial<TranslateQuery> = {}): TranslateQuery => ({
  codings: [{ system, version: undefined, code }],
  targetSystem: undefined,
  reverse: false,
  dependencies: [],
  ...extra
})

const matchTexts = (matches: ReadonlyArray<{ readonly equivalence: string; readonly concept: Record<string, string> | undefined }>) =>
  matches.map((match) => `${match.equivalence} ${match.concept?.["code"] ?? "-"}`)

test("$lookup: a display in the language asked for, designations with their language and use, lang.X", (catalog) => {
  const ambiguous = lookup(catalog, v2Sex, "A", { displayLanguage: "de-CH" })
  expect(ambiguous.find((p) => p.name === "display")).toEqual({ name: "display", valueString: "mehrdeutig" })
  expect(ambiguous.filter((p) => p.name === "designation").map((p) => (p["part"] as Array<any>).find((part) => part.name === "language").valueCode)).toEqual(["de", "nl"])
  const english = lookup(catalog, v2Sex, "A")
  expect(english.find((p) => p.name === "display")).toEqual({ name: "display", valueString: "Ambiguous" })
  const dutchOnly = lookup(catalog, v2Sex, "A", { properties: ["lang.nl"] })
  expect(dutchOnly.map((p) => p.name)).toEqual(["name", "version", "display", "designation"])
  expect((dutchOnly[3]!["part"] as Array<any>).map((part) => part.name)).toEqual(["language", "use", "value"])
})

test("$lookup: an inactive concept says so; an unknown system, a value set's url and SNOMED CT are refused as what they are", (catalog) => {
  // v3-ActCode's retired concepts carry a status property.
  const retired = held(catalog, actCode).codeSystem.concepts().find((concept) =>
    (concept.json["property"] as Array<any> | undefined)?.some((p) => p.code === "status" && p.valueCode === "retired"))
  expect(retired).toBeDefined()
  const answer = lookup(catalog, actCode, retired!.code, { properties: ["inactive"] })
  expect(answer.filter((p) => p.name === "property")).toEqual([{ name: "property", part: [{ name: "code", valueCode: "inactive" }, { name: "value", valueBoolean: true }] }])
  expect(refusal(heldCodeSystem(catalog, "http://loinc.org", undefined, "look up the code '1963-8'")))
    .toBe("not-found: The code system 'http://loinc.org' is not known to this server (it holds no CodeSystem with that url), so it cannot look up the code '1963-8'")
  expect(refusal(heldCodeSystem(catalog, genderValueSet, undefined, "look it up"))).toBe(`invalid: '${genderValueSet}' is a ValueSet, not a code system`)
  expect(refusal(heldCodeSystem(catalog, "http://snomed.info/sct", undefined, "look it up"))).toMatch(/^422: This server holds the code system 'http:\/\/snomed.info\/sct' without its concepts/)
  expect(refusal(heldCodeSystem(catalog, gender, "9.9", "look it up"))).toBe(`not-found: This server does not hold version '9.9' of the code system '${gender}' (it holds 4.0.1), so it cannot look it up`)
})

test("$subsumes follows the hierarchy transitively, and refuses a hierarchy that does not mean is-a", (catalog) => {
  const codeSystem = held(catalog, actCode)
  const relate = (a: string, b: string) =>
    Effect.runSync(Effect.flatMap(Effect.all([conceptOf(codeSystem, a), conceptOf(codeSystem, b)]), ([x, y]) => subsumption(codeSystem.codeSystem, x, y)))
  // _ActCoverageTypeCode > _ActInsurancePolicyCode > EHCPOL > (no further) : grandparent to grandchild.
  const grandchild = codeSystem.codeSystem.concept("_ActInsurancePolicyCode")!.children[0]!
  expect(relate("_ActCoverageTypeCode", grandchild)).toBe("subsumes")
  expect(relate(grandchild, "_ActCoverageTypeCode")).toBe("subsumed-by")
  expect(relate("_ActAccountCode", "_ActCoverageTypeCode")).toBe("not-subsumed")
  const grouped = { ...codeSystem.codeSystem, hierarchyMeaning: "grouped-by" }
  const concept = codeSystem.codeSystem.concept("CASH")!
  expect(refusal(subsumption(grouped, concept, concept))).toContain("means 'grouped-by', not is-a")
})

test("$validate-code on a value set: members, other codes, a code given without its system, display in another language", (catalog) => {
  expect(inGender(catalog, { system: gender, code: "female" })).toMatchObject({ result: true, display: "Female", findings: [] })
  const other = inGender(catalog, { system: v2Sex, code: "F" })
  expect([other.result, messageOf(other.findings)]).toEqual([false, `The code '${v2Sex}#F' is not in the value set ${genderValueSet}`])
  const bare = inGender(catalog, { code: "male" })
  expect([bare.result, bare.findings.map((finding) => finding.severity)]).toEqual([true, ["information"]])
  // Any of the concept's designations is a right display.
  const dutch = combine([codingInCodeSystem(catalog, catalog.codeSystem(v2Sex)!, { system: v2Sex, code: "A", display: "Ambigu" }, options, "Coding")])
  expect([dutch.result, dutch.findings]).toEqual([true, []])
})

test("$validate-code: a value set that needs SNOMED CT cannot be decided; a code of a system held in part is not known here", (catalog) => {
  const snomed = combine([codingInValueSet(catalog, "http://hl7.org/fhir/ValueSet/clinical-findings", "findings", { system: "http://snomed.info/sct", code: "22298006" }, options, "Coding")])
  expect([snomed.result, snomed.causes, snomed.findings.map((finding) => finding.code)]).toEqual([false, ["http://snomed.info/sct"], ["not-supported"]])
  const plans = "http://terminology.hl7.org/CodeSystem/insurance-plan-type"
  const fragment = combine([codingInCodeSystem(catalog, catalog.codeSystem(plans)!, { code: "no-such-plan" }, options, "Coding")])
  expect([fragment.result, fragment.causes, fragment.findings[0]?.severity]).toEqual([false, [plans], "warning"])
  expect(messageOf(fragment.findings)).toContain("only in part (content 'fragment')")
  // A coding of one system against another code system is not valid there.
  const elsewhere = combine([codingInCodeSystem(catalog, catalog.codeSystem(gender)!, { system: v2Sex, code: "M" }, options, "Coding")])
  expect(messageOf(elsewhere.findings)).toBe(`The coding's system '${v2Sex}' is not the code system '${gender}'`)
})

test("$validate-code on a CodeableConcept: valid when one coding is, and the others' errors are left out of its message", (catalog) => {
  const verdict = combine([
    codingInValueSet(catalog, genderValueSet, genderValueSet, { system: gender, code: "nope" }, options, "CodeableConcept.coding[0]"),
    codingInValueSet(catalog, genderValueSet, genderValueSet, { system: gender, code: "male", display: "Mann" }, options, "CodeableConcept.coding[1]")
  ])
  expect([verdict.result, verdict.display]).toEqual([true, "Male"])
  expect(verdict.findings.map((finding) => [finding.severity, finding.expression])).toEqual([["warning", "CodeableConcept.coding[1].display"]])
})

test("the catalog compiles ConceptMaps: by url and version, by source and target value set, with their groups' systems", (catalog) => {
  const map = catalog.conceptMap("http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2")
  expect(map && [map.source, map.target, map.systems]).toEqual([genderValueSet, "http://terminology.hl7.org/ValueSet/v2-0001", [{ source: gender, target: v2Sex }]])
  expect(catalog.conceptMap("http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2|4.0.1")).toBe(map)
  expect(catalog.conceptMapsBetween(genderValueSet, undefined).map((m) => m.url).sort())
    .toEqual(["http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2", "http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v3"])
  expect(catalog.conceptMapsBetween(genderValueSet, "http://terminology.hl7.org/ValueSet/v2-0001|2.9").map((m) => m.url)).toEqual([map!.url])
  expect(catalog.conceptMapsBetween("http://example.org/none", undefined)).toEqual([])
  expect(catalog.conceptMaps.length).toBeGreaterThan(50)
})

test("$translate: reverse turns equivalences round, targetsystem keeps to its groups, unmapped other-map and provided are followed", (catalog) => {
  const v3Map = catalog.conceptMap("http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v3")!
  const v2Map = catalog.conceptMap("http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2")!
  expect(matchTexts(translate([v2Map], forward(gender, "other"), catalog.conceptMap).matches)).toEqual(["wider A", "wider O"])
  expect(matchTexts(translate([v2Map], forward(v2Sex, "O", { reverse: true }), catalog.conceptMap).matches)).toEqual(["narrower other"])
  expect(matchTexts(translate([v2Map, v3Map], forward(gender, "female", { targetSystem: v2Sex }), catalog.conceptMap).matches)).toEqual(["equal F"])
  // example2 sends unmapped codes to a map the R4 packages do not have.
  const example2 = catalog.conceptMap("http://hl7.org/fhir/ConceptMap/example2")!
  const unmapped = translate([example2], forward("http://example.org/fhir/example1", "other"), catalog.conceptMap)
  expect([unmapped.result, unmapped.messages.join(" | ")]).toEqual([false, expect.stringContaining("which sends unmapped codes to the ConceptMap http://example.org/fhir/ConceptMap/map2: this server does not hold it")])
  const provided = { ...v2Map, url: "http://example.org/provided", groups: [{ ...v2Map.groups[0]!, element: [], unmapped: { mode: "other-map", code: undefined, display: undefined, url: "http://example.org/same" } }] }
  const same = { ...v2Map, url: "http://example.org/same", groups: [{ ...v2Map.groups[0]!, element: [], unmapped: { mode: "provided", code: undefined, display: undefined, url: undefined } }] }
  const followed = translate([provided], forward(gender, "male"), (url) => (url === same.url ? same : undefined))
  expect(followed.matches).toEqual([{ equivalence: "equivalent", concept: { system: v2Sex, code: "male" }, product: [], source: "http://example.org/same" }])
  // A map that sends unmapped codes to itself is not followed round.
  const circle = { ...same, groups: [{ ...same.groups[0]!, unmapped: { mode: "other-map", code: undefined, display: undefined, url: same.url } }] }
  expect(translate([circle], forward(gender, "male"), () => circle).messages.join(" | ")).toContain("was not followed")
})

test("$translate gives a target's product as the match's product", (catalog) => {
  const map = catalog.conceptMap("http://hl7.org/fhir/ConceptMap/102")!
  const translation = translate([map], forward("http://terminology.hl7.org/CodeSystem/v2-0487", "ACNFLD"), catalog.conceptMap)
  expect(translation.matches).toEqual([{
    equivalence: "equivalent",
    concept: { system: "http://snomed.info/sct", code: "119323008" },
    product: [{ element: "TypeModifier", concept: { system: "http://snomed.info/sct", code: "47002008" } }],
    source: "http://hl7.org/fhir/ConceptMap/102"
  }])
  const unmatched = translate([map], forward("http://terminology.hl7.org/CodeSystem/v2-0487", "ASERU"), catalog.conceptMap)
  expect([unmatched.result, matchTexts(unmatched.matches)]).toEqual([false, ["unmatched -"]])
})
