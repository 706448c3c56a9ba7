/**
 * `_filter` read into its syntax tree (the R4 grammar) and against the R4 catalog into criteria:
 * every operator, and/or left to right, parentheses, not(), strings and escapes, paths through references
 * with bracketed filters, and every problem it is refused with.
 */
import { describe, expect, it } from "vitest"
import { type FilterSyntax, maxComparisons, maxNesting, parseFilter } from "../../../src/search/filter/parse.ts"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { maxReadComparisons } from "../../../src/search/filter/read.ts"
import type { FilterExpr, Problem } from "../../../src/search/parse/SearchRequest.ts"
import { accepted, catalogTests, refused } from "../parse/support.ts"

const syntax = (text: string): FilterSyntax => {
  const read = parseFilter(text)
  if ("message" in read) throw new Error(`expected '${text}' to parse, got ${read.message}`)
  return read
}

const syntaxProblem = (text: string): Problem => {
  const read = parseFilter(text)
  if (!("message" in read)) throw new Error(`expected '${text}' to be refused`)
  return read
}

/** A comparison's path names, operator and value text, for compact expectations. */
const shape = (tree: FilterSyntax): unknown => {
  switch (tree.kind) {
    case "and":
    case "or":
      return { [tree.kind]: tree.operands.map(shape) }
    case "not":
      return { not: shape(tree.operand) }
    case "compare":
      return `${tree.path.map((step) => step.name).join(".")} ${tree.operator} ${tree.value.text}`
  }
}

describe("_filter syntax", () => {
  it("reads every operator of R4's table", () => {
    for (const operator of ["eq", "ne", "co", "sw", "ew", "gt", "lt", "ge", "le", "sa", "eb", "ap", "pr", "po", "ss", "sb", "in", "ni", "re"]) {
      expect(syntax(`x ${operator} 1`)).toMatchObject({ kind: "compare", operator, path: [{ name: "x" }], value: { text: "1", quoted: false } })
    }
  })

  it("evaluates and and or left to right, with no precedence between them", () => {
    expect(shape(syntax("a eq 1 or b eq 2 and c eq 3"))).toEqual({ and: [{ or: ["a eq 1", "b eq 2"] }, "c eq 3"] })
    expect(shape(syntax("a eq 1 and b eq 2 or c eq 3"))).toEqual({ or: [{ and: ["a eq 1", "b eq 2"] }, "c eq 3"] })
    expect(shape(syntax("a eq 1 and b eq 2 and c eq 3"))).toEqual({ and: ["a eq 1", "b eq 2", "c eq 3"] })
  })

  it("groups with parentheses, and negates with not(...)", () => {
    expect(shape(syntax("a eq 1 or (b eq 2 and c eq 3)"))).toEqual({ or: ["a eq 1", { and: ["b eq 2", "c eq 3"] }] })
    expect(shape(syntax("((a eq 1))"))).toEqual("a eq 1")
    expect(shape(syntax("not(a eq 1) and not (b eq 2 or c eq 3)"))).toEqual({ and: [{ not: "a eq 1" }, { not: { or: ["b eq 2", "c eq 3"] } }] })
    expect(shape(syntax("( a eq 1 )"))).toEqual("a eq 1")
  })

  it("reads keywords and operators in any case, and any run of whitespace between the parts", () => {
    expect(shape(syntax("a EQ 1  AND\tNOT( b Ne 2 )"))).toEqual({ and: ["a eq 1", { not: "b ne 2" }] })
    // A name that starts with a keyword is a name.
    expect(shape(syntax("notes eq 1 or order eq 2 and andy eq 3"))).toEqual({ and: [{ or: ["notes eq 1", "order eq 2"] }, "andy eq 3"] })
  })

  it("reads JSON strings with their escapes, and tokens up to whitespace, ')' or ']'", () => {
    expect(syntax(`name eq "peter (the) [great]"`)).toMatchObject({ value: { text: "peter (the) [great]", quoted: true } })
    expect(syntax(String.raw`name eq "a \"quoted\" \\ back\/slash\n\t\u00e9"`)).toMatchObject({ value: { text: "a \"quoted\" \\ back/slash\n\té" } })
    expect(syntax(`name eq ""`)).toMatchObject({ value: { text: "", quoted: true } })
    expect(shape(syntax("(code eq http://loinc.org|1234-5)"))).toEqual("code eq http://loinc.org|1234-5")
    expect(syntax("birthdate ge 2000-01-01T10:00:00+01:00")).toMatchObject({ value: { text: "2000-01-01T10:00:00+01:00" } })
  })

  it("reads paths through references, with filters in brackets at any step", () => {
    expect(syntax("related[type eq has-member].target pr true")).toMatchObject({
      path: [{ name: "related", filter: { kind: "compare", path: [{ name: "type" }], operator: "eq", value: { text: "has-member" } } }, { name: "target" }],
      operator: "pr",
      value: { text: "true" }
    })
    const nested = syntax(`patient[organization[name eq "x y"].active eq true and gender eq male].name sw "Ab"`)
    expect(nested).toMatchObject({
      path: [{ name: "patient", filter: { kind: "and", operands: [{ path: [{ name: "organization", filter: { value: { text: "x y" } } }, { name: "active" }] }, { path: [{ name: "gender" }] }] } }, { name: "name" }]
    })
    expect(syntax("subject:Patient.name eq x")).toMatchObject({ path: [{ name: "subject", type: "Patient" }, { name: "name" }] })
    expect(syntax("_id eq 1")).toMatchObject({ path: [{ name: "_id" }] })
    expect(syntax("value-quantity gt 5")).toMatchObject({ path: [{ name: "value-quantity" }] })
  })

  it("refuses what does not follow the grammar, naming _filter, the expression, the position and what was expected", () => {
    const cases: ReadonlyArray<readonly [string, number, string]> = [
      ["", 1, "a search parameter name, '(' or not("],
      ["   ", 4, "a search parameter name"],
      ["name", 5, "whitespace and an operator"],
      ["name eq", 8, "whitespace and a value"],
      ["name eq ", 9, "a value"],
      ["name is x", 6, "an operator (eq ne co"],
      ["name eqx y", 6, "an operator"],
      ["name:exact eq x", 5, "modifiers are not written in _filter"],
      ["1name eq x", 1, "a search parameter name"],
      ["name eq x y", 11, "'and', 'or' or the end"],
      ["name eq x xor b eq 1", 11, "'and', 'or' or the end"],
      ["name eq x and", 14, "whitespace after and"],
      ["name eq x and ", 15, "a search parameter name"],
      ["(name eq x", 11, "')', 'and' or 'or'"],
      ["name eq x)", 10, "'and', 'or' or the end"],
      ["not name eq x", 5, "'(' after not"],
      ["not(name eq x", 14, "')', 'and' or 'or'"],
      ["a[b eq 1.c eq 2", 12, "']' closing the filter"],
      ["a[b eq 1]c eq 2", 10, "whitespace and an operator"],
      ["a. eq 1", 3, "a search parameter name"],
      [`name eq "open`, 14, "the closing quote of the string opened at position 9"],
      [String.raw`name eq "a\qb"`, 11, "a JSON string escape"],
      [String.raw`name eq "\u12"`, 10, "a JSON string escape"],
      [`name eq "a"b`, 12, "whitespace, ')' or ']' after the string"]
    ]
    for (const [text, position, expected] of cases) {
      const problem = syntaxProblem(text)
      expect(problem, text).toMatchObject({ parameter: "_filter", value: text, status: 400, canSetAside: true })
      expect(problem.message, text).toContain(`The _filter expression '${text}' cannot be read at position ${position}: expected `)
      expect(problem.expected, text).toContain(expected)
    }
    expect(syntaxProblem("name eq x xor").message).toContain("found 'xor'")
    expect(syntaxProblem("name eq").message).toContain("found the end")
  })

  it("refuses expressions nested too deep or with too many comparisons", () => {
    const deep = `${"(".repeat(maxNesting + 1)}a eq 1${")".repeat(maxNesting + 1)}`
    expect(syntaxProblem(deep).message).toContain(`nest at most ${maxNesting} deep`)
    expect(syntax(`${"(".repeat(maxNesting)}a eq 1${")".repeat(maxNesting)}`)).toMatchObject({ kind: "compare" })
    const many = Array.from({ length: maxComparisons + 1 }, (_, i) => `a eq ${i}`).join(" or ")
    expect(syntaxProblem(many).message).toContain(`at most ${maxComparisons} comparisons`)
    expect(syntaxProblem(`${"not(".repeat(200)}a eq 1${")".repeat(200)}`).status).toBe(400)
  })
})

const withCatalog = catalogTests()

/** The one filter `_filter=text` on `type` reads as. */
const read = (c: Catalog, type: string, text: string): FilterExpr => {
  const request = accepted(c, type, `_filter=${encodeURIComponent(text)}`)
  expect(request.filters).toHaveLength(1)
  return request.filters[0]!
}

const problems = (c: Catalog, type: string, text: string) => refused(c, type, `_filter=${encodeURIComponent(text)}`)

describe("_filter against the R4 catalog", () => {
  withCatalog("dates, numbers and quantities take the operator as their prefix", (c) => {
    expect(read(c, "Patient", "birthdate ge 2000")).toEqual({
      kind: "test",
      criterion: expect.objectContaining({ code: "birthdate", exclude: false, values: [expect.objectContaining({ kind: "date", prefix: "ge", precision: "year" })] })
    })
    for (const operator of ["eq", "gt", "lt", "ge", "le", "sa", "eb", "ap"]) {
      expect(read(c, "Patient", `birthdate ${operator} 2000-01-01`)).toMatchObject({ kind: "test", criterion: { values: [{ kind: "date", prefix: operator }] } })
      expect(read(c, "RiskAssessment", `probability ${operator} 0.5`)).toMatchObject({ kind: "test", criterion: { values: [{ kind: "number", prefix: operator, value: 0.5 }] } })
      expect(read(c, "Observation", `value-quantity ${operator} 5.4|http://unitsofmeasure.org|mg`)).toMatchObject({
        kind: "test",
        criterion: { values: [{ kind: "quantity", prefix: operator, value: 5.4, system: "http://unitsofmeasure.org", code: "mg" }] }
      })
    }
    expect(read(c, "Patient", "birthdate ne 2000")).toMatchObject({ kind: "not", operand: { kind: "test", criterion: { values: [{ kind: "date", prefix: "eq" }] } } })
    expect(read(c, "Patient", "_lastUpdated gt 2020-01-01T00:00:00Z")).toMatchObject({ kind: "test", criterion: { code: "_lastUpdated", values: [{ prefix: "gt" }] } })
  })

  withCatalog("co and po on dates and co on numbers are comparisons of their own", (c) => {
    expect(read(c, "Patient", "birthdate co 2000-06")).toMatchObject({ kind: "compare", code: "birthdate", operator: "co", value: { kind: "date", precision: "month" } })
    expect(read(c, "Patient", "birthdate po 2000")).toMatchObject({ kind: "compare", operator: "po", value: { kind: "date", precision: "year" } })
    expect(read(c, "RiskAssessment", "probability co 0.52")).toMatchObject({ kind: "compare", operator: "co", value: { kind: "number", value: 0.52 } })
  })

  withCatalog("strings: sw is plain search, co is :contains, eq ew gt lt ge le compare the whole normalised value", (c) => {
    expect(read(c, "Patient", `name sw "Pet"`)).toMatchObject({ kind: "test", criterion: { code: "name", values: [{ kind: "string", value: "Pet" }] } })
    expect((read(c, "Patient", `name sw "Pet"`) as any).criterion.modifier).toBeUndefined()
    expect(read(c, "Patient", `name co "pet"`)).toMatchObject({ kind: "test", criterion: { modifier: { kind: "contains" }, values: [{ value: "pet" }] } })
    for (const operator of ["eq", "ew", "gt", "lt", "ge", "le"]) {
      expect(read(c, "Patient", `family ${operator} "Müller"`)).toMatchObject({ kind: "compare", code: "family", operator, value: { kind: "string", value: "Müller" } })
    }
    expect(read(c, "Patient", `family ne "x"`)).toMatchObject({ kind: "not", operand: { kind: "compare", operator: "eq" } })
    expect(read(c, "Patient", `family eq x`)).toMatchObject({ kind: "compare", value: { value: "x" } })
    expect(read(c, "Patient", `_content co "heart attack"`)).toMatchObject({ kind: "test", criterion: { code: "_content" } })
  })

  withCatalog("tokens: eq is plain search, ne its negation; ss and sb follow the hierarchy; in and ni a ValueSet", (c) => {
    expect(read(c, "Patient", "gender eq female")).toMatchObject({ kind: "test", criterion: { code: "gender", values: [{ kind: "token", code: "female" }] } })
    expect(read(c, "Patient", "gender ne female")).toMatchObject({ kind: "not", operand: { kind: "test", criterion: { exclude: false } } })
    expect(read(c, "Observation", "code eq http://loinc.org|1234-5")).toMatchObject({ criterion: { values: [{ system: "http://loinc.org", code: "1234-5" }] } })
    // R4: loinc, snomed, rxnorm and ucum stand for their systems.
    expect(read(c, "Observation", "code eq loinc|1234-5")).toMatchObject({ criterion: { values: [{ system: "http://loinc.org", code: "1234-5" }] } })
    expect(read(c, "Observation", "value-quantity gt 5|ucum|mg")).toMatchObject({ criterion: { values: [{ system: "http://unitsofmeasure.org", code: "mg" }] } })
    const codes = (expr: FilterExpr) => ((expr as any).criterion.values[0].codes as Array<{ code: string }>).map((c) => c.code).sort()
    // ss: the value subsumes the resource's code (the code is below it); sb: the value is subsumed by it.
    const ss = read(c, "Observation", "status ss http://hl7.org/fhir/observation-status|amended")
    expect(ss).toMatchObject({ kind: "test", criterion: { modifier: { kind: "below" } } })
    expect(codes(ss)).toEqual(["amended", "corrected"])
    const sb = read(c, "Observation", "status sb http://hl7.org/fhir/observation-status|corrected")
    expect(sb).toMatchObject({ kind: "test", criterion: { modifier: { kind: "above" } } })
    expect(codes(sb)).toEqual(["amended", "corrected"])
    expect(codes(read(c, "Observation", "status in http://hl7.org/fhir/ValueSet/observation-status"))).toContain("entered-in-error")
    expect(read(c, "Observation", "status ni http://hl7.org/fhir/ValueSet/observation-status")).toMatchObject({ kind: "not", operand: { criterion: { modifier: { kind: "in" } } } })
    expect(read(c, "ValueSet", "url ss http://x/ValueSet")).toMatchObject({ criterion: { modifier: { kind: "below" }, values: [{ kind: "uri" }] } })
    expect(read(c, "Patient", "_id eq abc")).toMatchObject({ criterion: { code: "_id", values: [{ kind: "id", id: "abc" }] } })
  })

  withCatalog("references: re is reference equality, pr is :missing the other way round", (c) => {
    expect(read(c, "Observation", "subject re Patient/1")).toMatchObject({ kind: "test", criterion: { code: "subject", values: [{ kind: "reference", types: ["Patient"], id: "1" }] } })
    expect(read(c, "Observation", "patient re 1")).toMatchObject({ criterion: { values: [{ kind: "reference", id: "1" }] } })
    expect(read(c, "Observation", "subject pr true")).toMatchObject({ kind: "test", criterion: { modifier: { kind: "missing" }, values: [{ kind: "missing", missing: false }] } })
    expect(read(c, "Patient", "birthdate pr FALSE")).toMatchObject({ criterion: { values: [{ kind: "missing", missing: true }] } })
  })

  withCatalog("and, or and not keep their shape around the criteria", (c) => {
    expect(read(c, "Patient", `gender eq female and (birthdate ge 2000 or not(name co "x"))`)).toMatchObject({
      kind: "and",
      operands: [{ kind: "test" }, { kind: "or", operands: [{ kind: "test" }, { kind: "not", operand: { kind: "test" } }] }]
    })
    const request = accepted(c, "Patient", `_filter=${encodeURIComponent("gender eq female")}&_filter=${encodeURIComponent("birthdate ge 2000")}&name=x`)
    expect(request.filters).toHaveLength(2)
    expect(request.clauses).toHaveLength(1)
  })

  withCatalog("a path through a reference is the chain plain search reads, when its end is a plain criterion", (c) => {
    expect(read(c, "Observation", `patient.name sw "Ab"`)).toEqual({
      kind: "test",
      criterion: expect.objectContaining({ kind: "chain", key: "patient.name", param: expect.objectContaining({ code: "patient" }), targets: [{ type: "Patient", inner: expect.objectContaining({ code: "name" }) }] })
    })
    expect(read(c, "Observation", "patient.organization.name co x")).toMatchObject({
      kind: "test",
      criterion: { kind: "chain", targets: [{ type: "Patient", inner: { kind: "chain", targets: [{ type: "Organization", inner: { modifier: { kind: "contains" } } }] } }] }
    })
    // A comparison plain search cannot say makes a filter chain.
    expect(read(c, "Observation", `patient.name eq "Ab"`)).toMatchObject({ kind: "chain", param: { code: "patient" }, targets: [{ type: "Patient", inner: { kind: "compare", operator: "eq" } }] })
    // ne applies at the end of the path: observations whose patient has no birthdate in 2000.
    expect(read(c, "Observation", "patient.birthdate ne 2000")).toMatchObject({ kind: "chain", targets: [{ inner: { kind: "not" } }] })
  })

  withCatalog("a path through a reference with several targets reads every target defining the rest, or the one :Type names", (c) => {
    const several = read(c, "Observation", `subject.name co "pet"`) as any
    expect(several.criterion.kind).toBe("chain")
    // Observation.subject refers to Patient, Group, Device and Location; Patient and Location have `name`.
    expect(several.criterion.targets.map((t: any) => t.type)).toEqual(["Patient", "Location"])
    expect(read(c, "Observation", "subject.birthdate ge 2000")).toMatchObject({ criterion: { targets: [{ type: "Patient" }] } })
    expect(read(c, "Observation", `subject:Patient.name co "pet"`)).toMatchObject({ criterion: { key: "subject:Patient.name", targets: [{ type: "Patient" }] } })
  })

  withCatalog("a filter in brackets restricts the targets of the reference, and the path goes on from them", (c) => {
    expect(read(c, "Observation", `patient[gender eq female].name sw "Ab"`)).toMatchObject({
      kind: "chain",
      param: { code: "patient" },
      targets: [{ type: "Patient", inner: { kind: "and", operands: [{ kind: "test", criterion: { code: "gender" } }, { kind: "test", criterion: { code: "name" } }] } }]
    })
    expect(read(c, "Observation", `performer[name co "x" and active eq true] pr true`)).toMatchObject({
      kind: "chain",
      targets: expect.arrayContaining([expect.objectContaining({ type: "Practitioner" }), expect.objectContaining({ type: "Organization" })])
    })
    // Observation.patient refers to Patient and Group; only Patient has `gender`. A chain of plain criteria is a plain chain.
    expect(read(c, "Observation", "patient[gender eq male] pr false")).toMatchObject({
      kind: "not",
      operand: { kind: "test", criterion: { kind: "chain", targets: [{ type: "Patient", inner: { code: "gender" } }] } }
    })
    expect(read(c, "Observation", "has-member[status eq final].subject re Patient/1")).toMatchObject({
      kind: "chain",
      param: { code: "has-member" },
      targets: expect.arrayContaining([expect.objectContaining({ type: "Observation" })])
    })
  })

  withCatalog("a parameter the type does not have is a 400 naming it, _filter and the position", (c) => {
    const [unknown] = problems(c, "Patient", "gender eq female and shoe-size gt 40")
    expect(unknown).toMatchObject({ parameter: "_filter", value: "gender eq female and shoe-size gt 40", status: 400, canSetAside: true })
    expect(unknown?.message).toBe("The _filter expression 'gender eq female and shoe-size gt 40' cannot be used at position 22: 'shoe-size' is not a search parameter of Patient")
    // R4's `related[...]` names are not search parameters of R4 Observation.
    expect(problems(c, "Observation", "related[type eq has-member].target pr true")[0]?.message).toContain("'related' is not a search parameter of Observation")
    expect(problems(c, "Observation", `patient.shoe-size eq 1`)[0]?.message).toContain("no type that Observation.patient refers to (Patient, Group) has the search parameter 'shoe-size'")
    expect(problems(c, "Observation", `patient[shoe-size eq 1].name eq x`)[0]?.message).toContain("'name', 'shoe-size'")
    expect(problems(c, "Patient", "_has eq x")[0]?.message).toContain("'_has' is not a search parameter of Patient")
  })

  withCatalog("a value that cannot be read for its parameter's type is a 400 naming the value, the parameter and what was expected", (c) => {
    const [date] = problems(c, "Patient", "birthdate ge 2000-13")
    expect(date).toMatchObject({ parameter: "_filter", value: "birthdate ge 2000-13", status: 400, canSetAside: true })
    expect(date?.message).toBe("The value '2000-13' of search parameter 'birthdate' in _filter 'birthdate ge 2000-13' at position 14 cannot be read: expected a date, dateTime or instant (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]][Z|+hh:mm|-hh:mm]), without a prefix")
    expect(problems(c, "Patient", "birthdate eq ge2000")[0]?.message).toContain("'ge2000'")
    expect(problems(c, "Patient", "birthdate co soon")[0]?.message).toContain("'soon'")
    expect(problems(c, "RiskAssessment", "probability gt high")[0]?.message).toContain("expected a decimal number, without a prefix")
    expect(problems(c, "Observation", "value-quantity lt 5|a|b|c")[0]?.message).toContain("number or number|system|code")
    expect(problems(c, "Patient", "birthdate pr maybe")[0]?.message).toContain("expected true or false")
    expect(problems(c, "Observation", "patient[gender eq male] pr maybe")[0]?.message).toContain("expected true or false")
    // Behind a path, too.
    expect(problems(c, "Observation", "patient.birthdate lt yesterday")[0]?.message).toContain("'yesterday' of search parameter 'birthdate'")
    // Each problem of the expression is reported.
    expect(problems(c, "Patient", "birthdate ge x or nope eq 1")).toHaveLength(2)
  })

  withCatalog("an operator that does not apply to the parameter's type is a 400 listing those that do", (c) => {
    expect(problems(c, "Patient", "gender co fem")[0]?.message).toContain("the operator 'co' does not apply to the token parameter 'gender', which takes eq ne ss sb in ni pr")
    expect(problems(c, "Observation", "subject eq Patient/1")[0]?.message).toContain("which takes re pr")
    expect(problems(c, "Patient", "name po 2000")[0]?.message).toContain("'po' does not apply to the string parameter 'name'")
    expect(problems(c, "Observation", "value-quantity co 5")[0]?.message).toContain("'co' does not apply to the quantity parameter")
    expect(problems(c, "Patient", "_id sw a")[0]?.message).toContain("the id parameter '_id', which takes eq ne")
  })

  withCatalog("bad paths are 400s: through a parameter that is not a reference, to a type it cannot refer to, a bracket filter ending in anything but pr", (c) => {
    expect(problems(c, "Observation", "code.name eq x")[0]?.message).toContain("'code' of Observation is a token parameter; only reference parameters are followed by '.' or '['")
    expect(problems(c, "Observation", "patient:Organization.name eq x")[0]?.message).toContain("cannot refer to 'Organization'")
    expect(problems(c, "Observation", "patient[gender eq male] re Patient/1")[0]?.message).toContain("ends in 'pr true' or 'pr false'")
    expect(problems(c, "Observation", "nope.name eq x")[0]?.message).toContain("'nope' is not a search parameter of Observation")
  })

  withCatalog("what cannot be expanded or given as a bare id is refused as in plain search", (c) => {
    expect(problems(c, "Observation", "code in http://x/ValueSet/none")[0]).toMatchObject({ parameter: "_filter", status: 400, canSetAside: true })
    expect(problems(c, "Observation", "status ss amended")[0]?.message).toContain("system|code")
    const [bare] = problems(c, "Provenance", "target re 123")
    expect(bare).toMatchObject({ parameter: "_filter", status: 400, canSetAside: false })
    expect(bare?.message).toContain("Type/id")
  })

  withCatalog("a path over many target types reads at most maxReadComparisons comparisons: past that it is a 400", (c) => {
    // Provenance.target refers to any type: the bracketed filter is read once per type that has `name`.
    const names = Array.from({ length: 90 }, (_, i) => `name eq n${i}`).join(" or ")
    const [tooMany, ...others] = problems(c, "Provenance", `target[${names}] pr true`)
    expect(others).toHaveLength(0)
    expect(tooMany).toMatchObject({ parameter: "_filter", status: 400 })
    expect(tooMany?.message).toContain(`more than ${maxReadComparisons} comparisons`)
    expect(read(c, "Provenance", `target[name eq n0 or name eq n1] pr true`)).toMatchObject({ kind: "chain" })
  })

  withCatalog("_filter takes no modifier, and handling=lenient sets an unreadable _filter aside whole", (c) => {
    expect(refused(c, "Patient", "_filter:exact=gender%20eq%20male")[0]?.message).toContain("':exact'")
    const request = accepted(c, "Patient", `_filter=${encodeURIComponent("gender eq male and birthdate ge x")}&_filter=${encodeURIComponent("gender ne female")}&name=a`, true)
    expect(request.ignored).toMatchObject([{ parameter: "_filter", value: "gender eq male and birthdate ge x" }])
    expect(request.filters).toHaveLength(1)
    expect(request.clauses).toHaveLength(1)
    expect(accepted(c, "Patient", `_filter=${encodeURIComponent("(gender eq")}`, true).ignored).toMatchObject([{ parameter: "_filter", status: 400 }])
  })
})
