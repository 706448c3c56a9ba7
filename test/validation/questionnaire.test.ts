/** Questionnaires and QuestionnaireResponses checked against their Questionnaire (src/validation/questionnaire/). */
import { describe, expect } from "vitest"
import type { Issue } from "../../src/validation/Validator.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, problems } from "./support.ts"

const withCatalog = catalogTests()

const url = "http://forms.test/Questionnaire/q"

const questionnaire = (items: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) =>
  ({ resourceType: "Questionnaire", url, name: "Q", status: "active", item: items, ...extra })

const response = (items: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) =>
  ({ resourceType: "QuestionnaireResponse", questionnaire: url, status: "completed", ...(items.length > 0 ? { item: items } : {}), ...extra })

/** The problems of a response whose Questionnaire the caller's lookup supplies. */
const against = (c: Parameters<typeof problems>[0], q: Record<string, unknown>, qr: Record<string, unknown>): ReadonlyArray<Issue> =>
  problems(c, qr, { questionnaire: (u) => (u === url ? q : undefined) })

const one = (found: ReadonlyArray<Issue>) => {
  expect(found).toHaveLength(1)
  return found[0]!
}

const ext = (name: string, value: Record<string, unknown>) => ({ url: `http://hl7.org/fhir/StructureDefinition/${name}`, ...value })

describe("finding the Questionnaire", () => {
  withCatalog("a response whose questionnaire cannot be found gets a warning and is not checked further", (c) => {
    const found = problems(c, response([{ linkId: "nowhere", answer: [{ valueString: "x" }] }]))
    expect(found).toEqual([expect.objectContaining({ severity: "warning", code: "required", expression: "QuestionnaireResponse.questionnaire" })])
    expect(found[0]!.diagnostics).toContain("could not be found")
  })

  withCatalog("a response that names no questionnaire gets information only", (c) => {
    const found = validateResource({ resourceType: "QuestionnaireResponse", status: "completed" }, c).filter((i) => i.diagnostics.includes("questionnaire"))
    expect(found).toEqual([expect.objectContaining({ severity: "information", code: "required", expression: "QuestionnaireResponse" })])
  })

  withCatalog("a contained questionnaire is found by #id", (c) => {
    const q = { ...questionnaire([{ linkId: "a", type: "string" }]), id: "q" }
    const qr = { ...response([{ linkId: "b", answer: [{ valueString: "x" }] }]), questionnaire: "#q", contained: [q] }
    const found = one(errors(validateResource(qr, c)))
    expect(found).toMatchObject({ severity: "error", code: "not-found", expression: "QuestionnaireResponse" })
    expect(found.diagnostics).toContain("LinkId 'b' not found")
  })

  withCatalog("a questionnaire in the same Bundle is found by its url", (c) => {
    const bundle = {
      resourceType: "Bundle",
      type: "collection",
      entry: [
        { fullUrl: "http://forms.test/Questionnaire/q", resource: questionnaire([{ linkId: "a", type: "integer" }], { id: "q" }) },
        { fullUrl: "urn:uuid:6e3b6e2a-4a5e-4a28-9d3c-2b8f4c7a1e01", resource: response([{ linkId: "a", answer: [{ valueString: "x" }] }]) }
      ]
    }
    const found = one(errors(validateResource(bundle, c)))
    expect(found).toMatchObject({ code: "invariant", expression: "Bundle.entry[1].resource.item[0].answer[0].value.ofType(string)" })
    expect(found.diagnostics).toContain("must be of the type integer")
  })
})

describe("items against the questionnaire", () => {
  const q = questionnaire([
    { linkId: "g", type: "group", item: [{ linkId: "g.1", type: "string", text: "Name" }] },
    { linkId: "d", type: "display", text: "Read this" },
    { linkId: "n", type: "integer", required: true }
  ])

  withCatalog("a response that matches its questionnaire has no problems", (c) => {
    expect(against(c, q, response([{ linkId: "g", item: [{ linkId: "g.1", text: "Name", answer: [{ valueString: "x" }] }] }, { linkId: "n", answer: [{ valueInteger: 3 }] }]))).toEqual([])
  })

  withCatalog("an unknown linkId is an error", (c) => {
    const found = one(against(c, q, response([{ linkId: "zz", answer: [{ valueString: "x" }] }, { linkId: "n", answer: [{ valueInteger: 3 }] }])))
    expect(found).toMatchObject({ severity: "error", code: "not-found", expression: "QuestionnaireResponse" })
    expect(found.diagnostics).toContain("'zz'")
  })

  withCatalog("an item without linkId is an error", (c) => {
    const found = errors(against(c, q, response([{ text: "x" }, { linkId: "n", answer: [{ valueInteger: 3 }] }])))
    expect(found.some((i) => i.diagnostics.includes("no linkId"))).toBe(true)
  })

  withCatalog("an item in the wrong place is an error", (c) => {
    const found = one(against(c, q, response([{ linkId: "g.1", answer: [{ valueString: "x" }] }, { linkId: "n", answer: [{ valueInteger: 3 }] }])))
    expect(found).toMatchObject({ code: "structure", expression: "QuestionnaireResponse" })
    expect(found.diagnostics).toContain("wrong place")
  })

  withCatalog("items out of the questionnaire's order are an error", (c) => {
    const found = one(against(c, q, response([{ linkId: "n", answer: [{ valueInteger: 3 }] }, { linkId: "g", item: [{ linkId: "g.1", answer: [{ valueString: "x" }] }] }])))
    expect(found).toMatchObject({ code: "structure", expression: "QuestionnaireResponse" })
    expect(found.diagnostics).toContain("out of order")
  })

  withCatalog("an answer on a group or a display item is an error", (c) => {
    const found = against(c, q, response([
      { linkId: "g", answer: [{ valueString: "x" }] },
      { linkId: "d", answer: [{ valueString: "x" }] },
      { linkId: "n", answer: [{ valueInteger: 3 }] }
    ]))
    expect(found.map((i) => [i.expression, i.diagnostics])).toEqual([
      ["QuestionnaireResponse.item[0]", "Items of type 'group' cannot have answers"],
      ["QuestionnaireResponse.item[1]", "Items of type 'display' cannot have answers"]
    ])
  })

  withCatalog("items under a question item rather than under its answer are an error", (c) => {
    const q2 = questionnaire([{ linkId: "a", type: "string", item: [{ linkId: "a.1", type: "string" }] }])
    expect(against(c, q2, response([{ linkId: "a", answer: [{ valueString: "x", item: [{ linkId: "a.1", answer: [{ valueString: "y" }] }] }] }]))).toEqual([])
    const found = one(against(c, q2, response([{ linkId: "a", item: [{ linkId: "a.1", answer: [{ valueString: "y" }] }] }])))
    expect(found).toMatchObject({ code: "structure", expression: "QuestionnaireResponse.item[0]" })
    expect(found.diagnostics).toContain("answer.item")
  })

  withCatalog("a display item with inner items is an error", (c) => {
    const q2 = questionnaire([{ linkId: "d", type: "display", item: [{ linkId: "d.1", type: "display" }] }])
    const found = one(against(c, q2, response([{ linkId: "d", item: [{ linkId: "d.1" }] }])))
    expect(found.diagnostics).toContain("'display' cannot have items")
  })

  withCatalog("a text that differs from the questionnaire's is an error", (c) => {
    const found = one(against(c, q, response([{ linkId: "g", item: [{ linkId: "g.1", text: "Other", answer: [{ valueString: "x" }] }] }, { linkId: "n", answer: [{ valueInteger: 3 }] }])))
    expect(found).toMatchObject({ code: "invalid", expression: "QuestionnaireResponse.item[0].item[0]" })
    expect(found.diagnostics).toContain("text")
  })

  withCatalog("a required item without answer is an error once completed, a warning while in progress", (c) => {
    const completed = one(against(c, q, response([])))
    expect(completed).toMatchObject({ severity: "error", code: "required", expression: "QuestionnaireResponse" })
    expect(completed.diagnostics).toContain("required item 'n'")
    expect(one(against(c, q, response([], { status: "in-progress" })))).toMatchObject({ severity: "warning", code: "required" })
    expect(one(against(c, q, response([{ linkId: "n" }])))).toMatchObject({ severity: "error", expression: "QuestionnaireResponse.item[0]" })
  })

  withCatalog("a required group without items is an error", (c) => {
    const q2 = questionnaire([{ linkId: "g", type: "group", required: true, item: [{ linkId: "g.1", type: "string" }] }])
    const found = one(against(c, q2, response([{ linkId: "g" }])))
    expect(found).toMatchObject({ code: "invariant", expression: "QuestionnaireResponse.item[0]" })
    expect(found.diagnostics).toContain("required group 'g' has no items")
  })

  withCatalog("two answers or two items for something that does not repeat are errors", (c) => {
    const q2 = questionnaire([{ linkId: "a", type: "string" }, { linkId: "b", type: "string", repeats: true }])
    expect(against(c, q2, response([{ linkId: "a", answer: [{ valueString: "x" }] }, { linkId: "b", answer: [{ valueString: "x" }, { valueString: "y" }] }]))).toEqual([])
    const answers = one(against(c, q2, response([{ linkId: "a", answer: [{ valueString: "x" }, { valueString: "y" }] }])))
    expect(answers).toMatchObject({ code: "invalid", expression: "QuestionnaireResponse.item[0]" })
    expect(answers.diagnostics).toContain("only one answer")
    const items = one(against(c, q2, response([{ linkId: "a", answer: [{ valueString: "x" }] }, { linkId: "a", answer: [{ valueString: "y" }] }])))
    expect(items).toMatchObject({ code: "invalid", expression: "QuestionnaireResponse" })
  })

  withCatalog("minOccurs and maxOccurs bound the number of answers", (c) => {
    const q2 = questionnaire([{ linkId: "a", type: "string", repeats: true, extension: [ext("questionnaire-minOccurs", { valueInteger: 2 }), ext("questionnaire-maxOccurs", { valueInteger: 3 })] }])
    const answers = (n: number) => response([{ linkId: "a", answer: Array.from({ length: n }, (_, i) => ({ valueString: `v${i}` })) }])
    expect(against(c, q2, answers(2))).toEqual([])
    expect(against(c, q2, answers(3))).toEqual([])
    expect(one(against(c, q2, answers(1))).diagnostics).toContain("minimum number of answers is 2")
    expect(one(against(c, q2, answers(4))).diagnostics).toContain("maximum number of answers is 3")
  })
})

describe("answer values", () => {
  withCatalog("an answer of another type than the item's is an error", (c) => {
    const q = questionnaire([{ linkId: "a", type: "boolean" }, { linkId: "t", type: "text" }, { linkId: "u", type: "url" }])
    expect(against(c, q, response([{ linkId: "a", answer: [{ valueBoolean: true }] }, { linkId: "t", answer: [{ valueString: "x" }] }, { linkId: "u", answer: [{ valueUri: "http://x.org" }] }]))).toEqual([])
    const found = one(against(c, q, response([{ linkId: "a", answer: [{ valueCoding: { system: "http://x.org", code: "y" } }] }])))
    expect(found).toMatchObject({ severity: "error", code: "invariant", expression: "QuestionnaireResponse.item[0].answer[0].value.ofType(Coding)" })
    expect(found.diagnostics).toBe("The answer must be of the type boolean, not Coding")
  })

  withCatalog("integer and decimal answers respect minValue, maxValue and maxDecimalPlaces", (c) => {
    const q = questionnaire([
      { linkId: "i", type: "integer", extension: [ext("minValue", { valueInteger: 1 }), ext("maxValue", { valueInteger: 10 })] },
      { linkId: "d", type: "decimal", extension: [ext("minValue", { valueDecimal: 0.5 }), ext("maxDecimalPlaces", { valueInteger: 2 })] }
    ])
    expect(against(c, q, response([{ linkId: "i", answer: [{ valueInteger: 10 }] }, { linkId: "d", answer: [{ valueDecimal: 0.75 }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "i", answer: [{ valueInteger: 11 }] }, { linkId: "d", answer: [{ valueDecimal: 0.125 }] }]))
    expect(found.map((i) => [i.expression, i.diagnostics])).toEqual([
      ["QuestionnaireResponse.item[0].answer[0].value.ofType(integer)", "The value 11 is greater than the allowed maximum of 10"],
      ["QuestionnaireResponse.item[1].answer[0].value.ofType(decimal)", "The value 0.125 is less than the allowed minimum of 0.5"],
      ["QuestionnaireResponse.item[1].answer[0].value.ofType(decimal)", "The value 0.125 has too many decimal places (at most 2)"]
    ])
  })

  withCatalog("date, dateTime and time answers respect minValue and maxValue", (c) => {
    const q = questionnaire([
      { linkId: "d", type: "date", extension: [ext("minValue", { valueDate: "2020-01-01" })] },
      { linkId: "dt", type: "dateTime", extension: [ext("maxValue", { valueDateTime: "2022-06" })] },
      { linkId: "t", type: "time", extension: [ext("maxValue", { valueTime: "17:00:00" })] }
    ])
    expect(against(c, q, response([{ linkId: "d", answer: [{ valueDate: "2020" }] }, { linkId: "dt", answer: [{ valueDateTime: "2022-06" }] }, { linkId: "t", answer: [{ valueTime: "17:00:00" }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "d", answer: [{ valueDate: "2019-12-31" }] }, { linkId: "dt", answer: [{ valueDateTime: "2022-07" }] }, { linkId: "t", answer: [{ valueTime: "17:30:00" }] }]))
    expect(found.map((i) => i.diagnostics)).toEqual([
      "The value 2019-12-31 is less than the allowed minimum of 2020-01-01",
      "The value 2022-07 is greater than the allowed maximum of 2022-06",
      "The value 17:30:00 is greater than the allowed maximum of 17:00:00"
    ])
  })

  withCatalog("string answers respect minLength, maxLength and regex, and should not hold new lines", (c) => {
    const q = questionnaire([{
      linkId: "s", type: "string", maxLength: 12, repeats: true,
      extension: [ext("minLength", { valueInteger: 3 }), ext("regex", { valueString: "[a-z@.]+" }), ext("entryFormat", { valueString: "a@b.c" })]
    }])
    expect(against(c, q, response([{ linkId: "s", answer: [{ valueString: "a@b.org" }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "s", answer: [{ valueString: "ab" }, { valueString: "abcdefghijklm" }, { valueString: "A@B" }, { valueString: "ab\ncd" }] }]))
    expect(found.map((i) => [i.severity, i.expression.replace("QuestionnaireResponse.item[0].", ""), i.diagnostics])).toEqual([
      ["error", "answer[0].value.ofType(string)", "The answer 'ab' is shorter than the required minimum length of 3"],
      ["error", "answer[1].value.ofType(string)", "The answer 'abcdefghijklm' is longer than the allowed maximum length of 12"],
      ["error", "answer[2].value.ofType(string)", "The answer 'A@B' does not have the expected format 'a@b.c' (regex '[a-z@.]+')"],
      ["error", "answer[3].value.ofType(string)", "The answer 'ab\ncd' does not have the expected format 'a@b.c' (regex '[a-z@.]+')"],
      ["warning", "answer[3].value.ofType(string)", "A string answer should not contain new line characters (the item type 'text' takes them)"]
    ])
  })

  withCatalog("a regex that repeats a repeated group is not run (it may take exponential time)", (c) => {
    const q = questionnaire([{ linkId: "s", type: "string", extension: [ext("regex", { valueString: "(a+)+b" })] }])
    const issues = validateResource(response([{ linkId: "s", answer: [{ valueString: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac" }] }]), c, { questionnaire: (u) => (u === url ? q : undefined) })
    expect(errors(issues)).toEqual([])
    expect(issues).toContainEqual(expect.objectContaining({ severity: "information", code: "not-supported", expression: "QuestionnaireResponse.item[0].answer[0].value.ofType(string)" }))
  })

  withCatalog("a string answer outside the item's answerValueSet is an error", (c) => {
    const q = questionnaire([{ linkId: "s", type: "string", answerValueSet: "http://hl7.org/fhir/ValueSet/administrative-gender" }])
    expect(against(c, q, response([{ linkId: "s", answer: [{ valueString: "male" }] }]))).toEqual([])
    expect(one(against(c, q, response([{ linkId: "s", answer: [{ valueString: "dog" }] }]))).diagnostics).toContain("not in the list of allowed values")
    const unknown = questionnaire([{ linkId: "s", type: "string", answerValueSet: "http://forms.test/ValueSet/none" }])
    expect(one(against(c, unknown, response([{ linkId: "s", answer: [{ valueString: "dog" }] }])))).toMatchObject({ severity: "warning", code: "not-found" })
  })

  withCatalog("answers of integer, date, time and string items must be among their answerOptions", (c) => {
    const q = questionnaire([
      { linkId: "i", type: "integer", answerOption: [{ valueInteger: 1 }, { valueInteger: 2 }] },
      { linkId: "d", type: "date", answerOption: [{ valueDate: "2022-01-01" }] },
      { linkId: "t", type: "time", answerOption: [{ valueTime: "08:00:00" }] },
      { linkId: "s", type: "string", answerOption: [{ valueString: "a" }] }
    ])
    expect(against(c, q, response([{ linkId: "i", answer: [{ valueInteger: 2 }] }, { linkId: "d", answer: [{ valueDate: "2022-01-01" }] }, { linkId: "t", answer: [{ valueTime: "08:00:00" }] }, { linkId: "s", answer: [{ valueString: "a" }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "i", answer: [{ valueInteger: 3 }] }, { linkId: "d", answer: [{ valueDate: "2022-03-01" }] }, { linkId: "t", answer: [{ valueTime: "09:00:00" }] }, { linkId: "s", answer: [{ valueString: "b" }] }]))
    expect(found.map((i) => i.diagnostics)).toEqual([
      "The integer 3 is not one of the permitted values",
      "The date 2022-03-01 is not one of the permitted values",
      "The time 09:00:00 is not one of the permitted values",
      "The string b is not one of the permitted values"
    ])
  })

  withCatalog("choice answers must be among the options; an exclusive option stands alone", (c) => {
    const coding = (code: string) => ({ system: "http://forms.test/cs", code })
    const q = questionnaire([{
      linkId: "c", type: "choice", repeats: true,
      answerOption: [{ valueCoding: coding("a") }, { valueCoding: coding("b") }, { valueCoding: coding("none"), extension: [ext("questionnaire-optionExclusive", { valueBoolean: true })] }]
    }])
    expect(against(c, q, response([{ linkId: "c", answer: [{ valueCoding: coding("a") }, { valueCoding: coding("b") }] }]))).toEqual([])
    expect(against(c, q, response([{ linkId: "c", answer: [{ valueCoding: coding("none") }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "c", answer: [{ valueCoding: coding("a") }, { valueCoding: coding("none") }, { valueCoding: coding("z") }] }]))
    expect(found.map((i) => [i.expression, i.diagnostics])).toEqual([
      ["QuestionnaireResponse.item[0].answer[1]", "The answer http://forms.test/cs#none is an exclusive option: no other answer may be selected with it"],
      ["QuestionnaireResponse.item[0].answer[2]", "The code http://forms.test/cs::z is not one of the permitted values"]
    ])
  })

  withCatalog("a string answer to a choice item with only coded options is an error; on an open-choice item it is allowed", (c) => {
    const options = [{ valueCoding: { system: "http://forms.test/cs", code: "a", display: "Apple" } }]
    const choice = questionnaire([{ linkId: "c", type: "choice", answerOption: options }])
    const found = one(against(c, choice, response([{ linkId: "c", answer: [{ valueString: "pear" }] }])))
    expect(found).toMatchObject({ severity: "error", expression: "QuestionnaireResponse.item[0].answer[0]", diagnostics: "The answer options list no value of type string" })
    const open = questionnaire([{ linkId: "c", type: "open-choice", answerOption: options }])
    expect(against(c, open, response([{ linkId: "c", answer: [{ valueString: "pear" }] }]))).toEqual([])
    expect(one(against(c, open, response([{ linkId: "c", answer: [{ valueString: "apple" }] }])))).toMatchObject({ severity: "warning" })
  })

  withCatalog("answers to a choice item that lists no options cannot be checked: information", (c) => {
    const q = questionnaire([{ linkId: "c", type: "choice", repeats: true }])
    const found = validateResource(response([{ linkId: "c", answer: [
      { valueCoding: { system: "http://forms.test/cs", code: "a" } }, { valueString: "s" }, { valueInteger: 1 }, { valueDate: "2020-01-01" }, { valueTime: "10:00:00" }
    ] }]), c, { questionnaire: (u) => (u === url ? q : undefined) }).filter((i) => i.diagnostics.includes("no options"))
    expect(found.map((i) => [i.severity, i.expression, i.diagnostics])).toEqual([
      ["information", "QuestionnaireResponse.item[0].answer[0]", "The Coding cannot be checked: the item lists no options"],
      ["information", "QuestionnaireResponse.item[0].answer[1]", "The string answer cannot be checked: the item lists no options"],
      ["information", "QuestionnaireResponse.item[0].answer[2]", "The integer answer cannot be checked: the item lists no options"],
      ["information", "QuestionnaireResponse.item[0].answer[3]", "The date answer cannot be checked: the item lists no options"],
      ["information", "QuestionnaireResponse.item[0].answer[4]", "The time answer cannot be checked: the item lists no options"]
    ])
  })

  withCatalog("answers of a type the options do not list are an error", (c) => {
    const q = questionnaire([
      { linkId: "c", type: "choice", repeats: true, answerOption: [{ valueString: "a" }] },
      { linkId: "n", type: "integer", answerOption: [{ valueString: "one" }] },
      { linkId: "d", type: "decimal", answerOption: [{ valueInteger: 1 }] }
    ])
    expect(against(c, q, response([{ linkId: "d", answer: [{ valueDecimal: 1 }] }]))).toEqual([])
    const found = against(c, q, response([
      { linkId: "c", answer: [{ valueCoding: { system: "http://forms.test/cs", code: "a" } }, { valueInteger: 1 }, { valueDate: "2020-01-01" }, { valueTime: "10:00:00" }] },
      { linkId: "n", answer: [{ valueInteger: 1 }] },
      { linkId: "d", answer: [{ valueDecimal: 1.5 }] }
    ]))
    expect(found.map((i) => [i.expression.replace("QuestionnaireResponse.", ""), i.diagnostics])).toEqual([
      ["item[0].answer[0]", "The answer options list no Coding"],
      ["item[0].answer[1]", "The answer options list no value of type integer"],
      ["item[0].answer[2]", "The answer options list no value of type date"],
      ["item[0].answer[3]", "The answer options list no value of type time"],
      ["item[1].answer[0].value.ofType(integer)", "The answer options list no value of type integer"],
      ["item[2].answer[0].value.ofType(decimal)", "The decimal 1.5 is not one of the permitted values"]
    ])
  })

  withCatalog("an item whose questionnaire item has no type is an error", (c) => {
    const found = errors(against(c, questionnaire([{ linkId: "a" }]), response([{ linkId: "a", answer: [{ valueString: "x" }] }])))
    expect(found).toEqual([expect.objectContaining({ code: "required", expression: "QuestionnaireResponse.item[0]", diagnostics: "The questionnaire's item 'a' has no type" })])
  })

  withCatalog("a Coding outside a choice item's answerValueSet is an error", (c) => {
    const q = questionnaire([{ linkId: "c", type: "choice", answerValueSet: "http://hl7.org/fhir/ValueSet/administrative-gender" }])
    const gender = (code: string) => ({ system: "http://hl7.org/fhir/administrative-gender", code })
    expect(against(c, q, response([{ linkId: "c", answer: [{ valueCoding: gender("male") }] }]))).toEqual([])
    // (the code is also unknown to the administrative-gender CodeSystem: an error of its own, at the Coding's code)
    const found = one(errors(against(c, q, response([{ linkId: "c", answer: [{ valueCoding: gender("dog") }] }]))).filter((issue) => !issue.expression.endsWith(".code")))
    expect(found).toMatchObject({ severity: "error", code: "code-invalid", expression: "QuestionnaireResponse.item[0].answer[0]" })
    expect(found.diagnostics).toContain("not in the options value set")
  })

  withCatalog("attachment answers respect mimeType and maxSize", (c) => {
    const q = questionnaire([{ linkId: "a", type: "attachment", repeats: true, extension: [ext("mimeType", { valueCode: "image/" }), ext("maxSize", { valueDecimal: 3 })] }])
    expect(against(c, q, response([{ linkId: "a", answer: [{ valueAttachment: { contentType: "image/png", data: "AAAA" } }] }]))).toEqual([])
    const found = against(c, q, response([{ linkId: "a", answer: [
      { valueAttachment: { contentType: "application/pdf" } },
      { valueAttachment: { url: "http://forms.test/photo" } },
      { valueAttachment: { contentType: "image/png", data: "AAAAAAAA" } }
    ] }]))
    expect(found.map((i) => [i.expression, i.diagnostics])).toEqual([
      ["QuestionnaireResponse.item[0].answer[0]", "The mime type application/pdf is not allowed for this answer (allowed: image/)"],
      ["QuestionnaireResponse.item[0].answer[1]", "The attachment needs a contentType (allowed: image/)"],
      ["QuestionnaireResponse.item[0].answer[2]", "The attachment is too large (at most 3 bytes, found 6)"]
    ])
  })

  withCatalog("reference answers name an allowed resource type", (c) => {
    const limited = questionnaire([{ linkId: "r", type: "reference", repeats: true, extension: [ext("questionnaire-referenceResource", { valueCode: "Patient" })] }])
    expect(against(c, limited, response([{ linkId: "r", answer: [{ valueReference: { reference: "Patient/1" } }] }]))).toEqual([])
    const found = one(errors(against(c, limited, response([{ linkId: "r", answer: [{ valueReference: { reference: "Organization/1" } }] }]))))
    expect(found).toMatchObject({ code: "invariant", expression: "QuestionnaireResponse.item[0].answer[0].value.ofType(Reference)" })
    expect(found.diagnostics).toContain("'Organization'")
    expect(one(errors(against(c, limited, response([{ linkId: "r", answer: [{ valueReference: { reference: "patient" } }] }])))).diagnostics).toContain("cannot be determined")
    const open = questionnaire([{ linkId: "r", type: "reference" }])
    expect(one(errors(against(c, open, response([{ linkId: "r", answer: [{ valueReference: { reference: "https://example.com/Chicken/1" } }] }])))).diagnostics).toContain("Chicken")
  })

  withCatalog("quantity answers respect the min and max quantity, comparing UCUM units", (c) => {
    const limit = (name: string, value: number, code: string) => ({ url: `http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-${name}`, valueQuantity: { value, system: "http://unitsofmeasure.org", code } })
    const q = questionnaire([{ linkId: "q", type: "quantity", extension: [limit("minQuantity", 1, "km"), limit("maxQuantity", 5, "km")] }])
    const quantity = (value: number, code: string) => response([{ linkId: "q", answer: [{ valueQuantity: { value, system: "http://unitsofmeasure.org", code } }] }])
    expect(against(c, q, quantity(2000, "m"))).toEqual([])
    expect(one(against(c, q, quantity(500, "m"))).diagnostics).toContain("less than the allowed minimum of 1 (UCUM#km)")
    expect(one(against(c, q, quantity(6, "km"))).diagnostics).toContain("greater than the allowed maximum")
    expect(against(c, q, quantity(3, "kg")).map((i) => i.diagnostics)).toEqual([
      "The quantity 3 (UCUM#kg) cannot be compared to the allowed minimum of 1 (UCUM#km)",
      "The quantity 3 (UCUM#kg) cannot be compared to the allowed maximum of 5 (UCUM#km)"
    ])
    const uncoded = response([{ linkId: "q", answer: [{ valueQuantity: { value: 3, unit: "km" } }] }])
    expect(against(c, q, uncoded)[0]!.diagnostics).toContain("no coded units")
  })

  withCatalog("quantity answers are compared with the min and max quantity in any UCUM units that convert", (c) => {
    const limit = (name: string, value: number, code: string) => ({ url: `http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-${name}`, valueQuantity: { value, system: "http://unitsofmeasure.org", code } })
    const q = questionnaire([{ linkId: "q", type: "quantity", extension: [limit("minQuantity", 5, "[stone_av]"), limit("maxQuantity", 100, "kg")] }])
    const quantity = (value: number, code: string) => response([{ linkId: "q", answer: [{ valueQuantity: { value, system: "http://unitsofmeasure.org", code } }] }])
    expect(against(c, q, quantity(11, "[stone_av]"))).toEqual([])
    expect(against(c, q, quantity(70, "kg"))).toEqual([])
    expect(one(against(c, q, quantity(20, "[stone_av]"))).diagnostics).toContain("greater than the allowed maximum")
    expect(one(against(c, q, quantity(30, "kg"))).diagnostics).toContain("less than the allowed minimum of 5 (UCUM#[stone_av])")
    expect(against(c, q, quantity(1, "[arb'U]"))).toEqual([])
  })

  withCatalog("quantity answers use a unit of the unitValueSet", (c) => {
    const q = (vs: string) => questionnaire([{ linkId: "q", type: "quantity", extension: [ext("questionnaire-unitValueSet", { valueCanonical: vs })] }])
    const answer = (code: string) => response([{ linkId: "q", answer: [{ valueQuantity: { value: 1, system: "http://hl7.org/fhir/administrative-gender", code } }] }])
    expect(against(c, q("http://hl7.org/fhir/ValueSet/administrative-gender"), answer("male"))).toEqual([])
    expect(one(errors(against(c, q("http://hl7.org/fhir/ValueSet/administrative-gender"), answer("dog")))).diagnostics).toContain("not in the unit value set")
    expect(one(against(c, q("http://forms.test/ValueSet/units"), answer("male")))).toMatchObject({ severity: "warning", code: "not-found" })
  })

  withCatalog("quantity answers use one of the unitOptions", (c) => {
    const q = questionnaire([{ linkId: "q", type: "quantity", extension: [ext("questionnaire-unitOption", { valueCoding: { system: "http://unitsofmeasure.org", code: "km" } })] }])
    expect(against(c, q, response([{ linkId: "q", answer: [{ valueQuantity: { value: 1, system: "http://unitsofmeasure.org", code: "km" } }] }]))).toEqual([])
    expect(one(against(c, q, response([{ linkId: "q", answer: [{ valueQuantity: { value: 1, system: "http://unitsofmeasure.org", code: "kg" } }] }]))).diagnostics).toContain("unit that is not allowed")
  })

  withCatalog("authored outside the questionnaire's effective period is a warning", (c) => {
    const q = questionnaire([{ linkId: "a", type: "string" }], { effectivePeriod: { start: "2020-01-01", end: "2020-12-31" } })
    expect(against(c, q, response([], { authored: "2020-06-01" }))).toEqual([])
    expect(one(against(c, q, response([], { authored: "2021-06-01" })))).toMatchObject({ severity: "warning", expression: "QuestionnaireResponse.authored" })
    expect(one(against(c, q, response([], { authored: "2019-06-01" }))).diagnostics).toContain("before the start")
  })
})

describe("enableWhen", () => {
  const q = questionnaire([
    { linkId: "smoker", type: "boolean" },
    { linkId: "packs", type: "integer", required: true, enableWhen: [{ question: "smoker", operator: "=", answerBoolean: true }] }
  ])

  withCatalog("answers to an item that enableWhen disables are an error", (c) => {
    expect(against(c, q, response([{ linkId: "smoker", answer: [{ valueBoolean: true }] }, { linkId: "packs", answer: [{ valueInteger: 2 }] }]))).toEqual([])
    const found = one(against(c, q, response([{ linkId: "smoker", answer: [{ valueBoolean: false }] }, { linkId: "packs", answer: [{ valueInteger: 2 }] }])))
    expect(found).toMatchObject({ severity: "error", code: "invalid", expression: "QuestionnaireResponse.item[1]" })
    expect(found.diagnostics).toContain("enableWhen disables it")
  })

  withCatalog("a required item that enableWhen disables need not be answered", (c) => {
    expect(against(c, q, response([{ linkId: "smoker", answer: [{ valueBoolean: false }] }]))).toEqual([])
    expect(one(against(c, q, response([{ linkId: "smoker", answer: [{ valueBoolean: true }] }]))).diagnostics).toContain("required item 'packs'")
  })

  withCatalog("enableWhen takes exists, comparisons and enableBehavior", (c) => {
    const q2 = questionnaire([
      { linkId: "age", type: "integer" },
      { linkId: "name", type: "string" },
      { linkId: "x", type: "string", enableBehavior: "all", enableWhen: [{ question: "age", operator: ">=", answerInteger: 18 }, { question: "name", operator: "exists", answerBoolean: true }] }
    ])
    const qr = (age: number, name: boolean) => response([{ linkId: "age", answer: [{ valueInteger: age }] }, ...(name ? [{ linkId: "name", answer: [{ valueString: "n" }] }] : []), { linkId: "x", answer: [{ valueString: "y" }] }])
    expect(against(c, q2, qr(18, true))).toEqual([])
    expect(one(against(c, q2, qr(17, true))).diagnostics).toContain("enableWhen disables it")
    expect(one(against(c, q2, qr(30, false))).diagnostics).toContain("enableWhen disables it")
  })

  withCatalog("an enableWhenExpression is evaluated on the response", (c) => {
    const q2 = questionnaire([
      { linkId: "a", type: "boolean" },
      {
        linkId: "b", type: "boolean",
        extension: [{ url: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-enableWhenExpression", valueExpression: { language: "text/fhirpath", expression: "%resource.item.where(linkId='a').answer.value" } }]
      }
    ])
    expect(against(c, q2, response([{ linkId: "a", answer: [{ valueBoolean: true }] }, { linkId: "b", answer: [{ valueBoolean: true }] }]))).toEqual([])
    expect(one(against(c, q2, response([{ linkId: "a", answer: [{ valueBoolean: false }] }, { linkId: "b", answer: [{ valueBoolean: true }] }]))).diagnostics).toContain("enableWhen disables it")
  })
})

describe("the Questionnaire's own rules", () => {
  withCatalog("an enableWhen naming no item of the questionnaire is an error", (c) => {
    const found = one(problems(c, questionnaire([{ linkId: "a", type: "string", enableWhen: [{ question: "zz", operator: "exists", answerBoolean: true }] }])))
    expect(found).toMatchObject({ severity: "error", code: "business-rule", expression: "Questionnaire.item[0]" })
    expect(found.diagnostics).toContain("'zz'")
  })

  withCatalog("an enableWhen naming the item itself or one of its inner items is an error", (c) => {
    const self = one(problems(c, questionnaire([{ linkId: "a", type: "string", enableWhen: [{ question: "a", operator: "exists", answerBoolean: true }] }])))
    expect(self.diagnostics).toContain("the item itself")
    const inner = one(problems(c, questionnaire([{ linkId: "g", type: "group", enableWhen: [{ question: "g.1", operator: "exists", answerBoolean: true }], item: [{ linkId: "g.1", type: "string" }] }])))
    expect(inner).toMatchObject({ severity: "error", expression: "Questionnaire.item[0]" })
    expect(inner.diagnostics).toContain("inside this one")
  })

  withCatalog("an enableWhen naming a later item is a warning; an earlier or enclosing one is fine", (c) => {
    const later = one(problems(c, questionnaire([{ linkId: "a", type: "string", enableWhen: [{ question: "b", operator: "exists", answerBoolean: true }] }, { linkId: "b", type: "string" }])))
    expect(later).toMatchObject({ severity: "warning", code: "business-rule", expression: "Questionnaire.item[0]" })
    expect(problems(c, questionnaire([
      { linkId: "a", type: "string" },
      { linkId: "g", type: "string", item: [{ linkId: "g.1", type: "string", enableWhen: [{ question: "g", operator: "exists", answerBoolean: true }, { question: "a", operator: "exists", answerBoolean: true }], enableBehavior: "any" }] }
    ]))).toEqual([])
  })

  withCatalog("a derived questionnaire keeps what the one it derives from fixes", (c) => {
    const base = questionnaire([{ linkId: "a", type: "string", maxLength: 10 }, { linkId: "b", type: "integer", required: true }])
    const derived = (items: ReadonlyArray<Record<string, unknown>>, code = "compliesWith") => ({
      ...questionnaire(items),
      url: "http://forms.test/Questionnaire/derived",
      derivedFrom: ["http://forms.test/Questionnaire/q"],
      _derivedFrom: [{ extension: [{ url: "http://hl7.org/fhir/StructureDefinition/questionnaire-derivationType", valueCoding: { system: "http://hl7.org/fhir/questionnaire-derivationType", code } }] }]
    })
    // questionnaire-derivationType is an extension R4 core does not define: its own warning is left out here.
    const own = (found: ReadonlyArray<Issue>) => found.filter((i) => i.code !== "extension")
    const check = (q: Record<string, unknown>) => own(problems(c, q, { questionnaire: (u) => (u === url ? base : undefined) }))
    expect(check(derived([{ linkId: "a", type: "string", maxLength: 5 }, { linkId: "b", type: "integer", required: true }]))).toEqual([])
    const found = check(derived([{ linkId: "a", type: "text", maxLength: 20 }, { linkId: "b", type: "integer", required: false }, { linkId: "c", type: "string" }]))
    expect(found.map((i) => i.expression)).toEqual([
      "Questionnaire.item[0].type", "Questionnaire.item[0].maxLength", "Questionnaire.item[1].required", "Questionnaire.item[2]"
    ])
    expect(check(derived([{ linkId: "c", type: "string" }], "extends"))).toEqual([])
    expect(one(own(problems(c, derived([{ linkId: "c", type: "string" }]))))).toMatchObject({ severity: "warning", expression: "Questionnaire.derivedFrom[0]" })
  })

  const derivedFrom = (items: ReadonlyArray<Record<string, unknown>>, coding: Record<string, unknown> | undefined) => ({
    ...questionnaire(items),
    url: "http://forms.test/Questionnaire/derived",
    derivedFrom: ["http://forms.test/Questionnaire/q"],
    _derivedFrom: [{ extension: [{ url: "http://hl7.org/fhir/StructureDefinition/questionnaire-derivationType", ...(coding === undefined ? { valueString: "x" } : { valueCoding: coding }) }] }]
  })
  const derivationType = (code: string) => ({ system: "http://hl7.org/fhir/questionnaire-derivationType", code })

  withCatalog("a derived item keeps the base item's answer options, repeats and definition", (c) => {
    const option = (code: string) => ({ valueCoding: { system: "http://forms.test/cs", code } })
    const base = questionnaire([
      { linkId: "a", type: "choice", answerOption: [option("x"), option("y")], definition: "http://forms.test/def#a" },
      { linkId: "b", type: "choice", answerValueSet: "http://forms.test/ValueSet/b" }
    ])
    const check = (items: ReadonlyArray<Record<string, unknown>>) =>
      validateResource(derivedFrom(items, derivationType("compliesWith")), c, { questionnaire: (u) => (u === url ? base : undefined) })
        .filter((i) => i.code === "business-rule").map((i) => [i.severity, i.expression, i.diagnostics])
    expect(check([{ linkId: "a", type: "choice", answerOption: [option("x")], definition: "http://forms.test/def#a" }, { linkId: "b", type: "choice", answerValueSet: "http://forms.test/ValueSet/b2" }])).toEqual([])
    expect(check([
      { linkId: "a", type: "choice", answerOption: [option("z")], repeats: true },
      { linkId: "b", type: "choice", answerOption: [option("x")] }
    ])).toEqual([
      ["error", "Questionnaire.item[0].repeats", "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' does not repeat, so it cannot repeat here"],
      ["information", "Questionnaire.item[0]", "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' has the definition 'http://forms.test/def#a', which should be repeated here"],
      ["error", "Questionnaire.item[0].answerOption[0]", "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' does not have this answerOption, so it is not allowed here"],
      ["error", "Questionnaire.item[1]", "The item 'b' of the questionnaire 'http://forms.test/Questionnaire/q' has an answerValueSet, while this has answerOptions: that cannot be checked"]
    ])
    expect(check([{ linkId: "a", type: "choice", answerValueSet: "http://forms.test/ValueSet/a", definition: "http://forms.test/other" }]).map((i) => i[2])).toEqual([
      "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' has the definition 'http://forms.test/def#a': is it meant to change?",
      "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' has answerOptions, while this has an answerValueSet: that cannot be checked"
    ])
    expect(check([{ linkId: "a", type: "choice", definition: "http://forms.test/def#a" }]).map((i) => i[2])).toEqual([
      "The item 'a' of the questionnaire 'http://forms.test/Questionnaire/q' has answerOptions, so this item must have some too"
    ])
  })

  withCatalog("a derivation without a known type is not checked", (c) => {
    const base = questionnaire([{ linkId: "a", type: "string" }])
    const check = (q: Record<string, unknown>) =>
      validateResource(q, c, { questionnaire: (u) => (u === url ? base : undefined) }).filter((i) => i.code === "business-rule").map((i) => [i.severity, i.diagnostics])
    const items = [{ linkId: "b", type: "integer" }]
    expect(check(derivedFrom(items, derivationType("inspiredBy")))).toEqual([["information", "The derivation type 'http://hl7.org/fhir/questionnaire-derivationType#inspiredBy' asks for no derivation checks"]])
    expect(check(derivedFrom(items, derivationType("other")))).toEqual([["warning", "The derivation type 'http://hl7.org/fhir/questionnaire-derivationType#other' is unknown: derivation was not checked"]])
    expect(check(derivedFrom(items, undefined))).toEqual([["warning", "The derivation type extension has no value"]])
    expect(check({ ...questionnaire(items), derivedFrom: [url] })).toEqual([["warning", `The derivation from '${url}' has no type (extension http://hl7.org/fhir/StructureDefinition/questionnaire-derivationType): derivation was not checked`]])
  })
})
