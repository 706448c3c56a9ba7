/** Bundle, reference, contained-resource and narrative-link rules, on Bundles and resources written for each check. */
import { describe, expect } from "vitest"
import { validateForWrite, validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, narrative, problems } from "./support.ts"

const withCatalog = catalogTests()

const patient = (id?: string, extra: Record<string, unknown> = {}) => ({ resourceType: "Patient", ...(id === undefined ? {} : { id }), text: narrative, ...extra })
const observation = (id: string, extra: Record<string, unknown> = {}) => ({
  resourceType: "Observation",
  id,
  text: narrative,
  status: "final",
  code: { text: "weight" },
  ...extra
})
const collection = (entry: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({ resourceType: "Bundle", type: "collection", ...extra, entry })

const at = (issues: ReadonlyArray<{ expression: string; diagnostics: string }>, text: string) =>
  issues.filter((issue) => issue.diagnostics.includes(text)).map((issue) => issue.expression)

describe("links", () => {
  withCatalog("a link relation that may occur once occurs twice", (c) => {
    const link = [
      { relation: "self", url: "http://example.org/fhir/Patient?name=a" },
      { relation: "self", url: "http://example.org/fhir/Patient?name=b" },
      { relation: "next", url: "http://example.org/fhir/Patient?page=2" },
      { relation: "next", url: "http://example.org/fhir/Patient?page=3" }
    ]
    const found = errors(validateResource({ resourceType: "Bundle", type: "searchset", link }, c))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([
      ["error", "Bundle.link[1]", "The link relation 'self' may occur only once"],
      ["error", "Bundle.link[3]", "The link relation 'next' may occur only once"]
    ])
    const once = { resourceType: "Bundle", type: "searchset", link: [link[0], link[2]] }
    expect(errors(validateResource(once, c))).toEqual([])
  })

  withCatalog("paging relations are allowed in search results and history only", (c) => {
    const link = [{ relation: "next", url: "http://svc.test/fhir/Bundle/b?page=2" }]
    const found = errors(validateResource(collection([{ fullUrl: "urn:uuid:206e7a1c-24a5-542b-bd55-f41ad8340e08", resource: patient() }], { link }), c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([
      ["Bundle.link[0].relation", "The link relation 'next' is for search results and history: it is not allowed in a collection Bundle"]
    ])
    expect(errors(validateResource({ resourceType: "Bundle", type: "history", link }, c))).toEqual([])
  })

  withCatalog("a document's stylesheet link resolves in the Bundle or is the FHIR stylesheet", (c) => {
    const doc = (url: string) => document([], [{ fullUrl: "http://example.org/fhir/Binary/css", resource: { resourceType: "Binary", id: "css", contentType: "text/css" } }], {
      link: [{ relation: "stylesheet", url }]
    })
    expect(at(errors(validateResource(doc("Binary/other"), c)), "stylesheet")).toEqual(["Bundle.link[0].url"])
    expect(errors(validateResource(doc("Binary/css"), c))).toEqual([])
    expect(problems(c, doc("https://hl7.org/fhir/fhir.css")).filter((issue) => issue.expression.startsWith("Bundle.link"))).toEqual([])
    const insecure = problems(c, doc("http://example.org/style.css")).filter((issue) => issue.expression === "Bundle.link[0].url")
    expect(insecure.map((issue) => issue.severity)).toEqual(["warning", "warning"])
    expect(insecure[1]!.diagnostics).toContain("http rather than https")
  })
})

describe("entries and fullUrls", () => {
  withCatalog("every entry has a fullUrl, except in transactions and batches", (c) => {
    const found = errors(validateResource(collection([{ resource: patient() }]), c))
    expect(found.map((issue) => issue.expression)).toEqual(["Bundle.entry[0]"])
    expect(found[0]!.diagnostics).toMatch(/^Except in transactions and batches \(and their responses\), each entry of a Bundle must have a fullUrl/)
    const transaction = { resourceType: "Bundle", type: "transaction", entry: [{ resource: patient(), request: { method: "POST", url: "Patient" } }] }
    expect(errors(validateResource(transaction, c))).toEqual([])
  })

  withCatalog("a fullUrl must be an absolute URL", (c) => {
    const found = errors(validateResource(collection([{ fullUrl: "Patient/1", resource: patient("1") }]), c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([["Bundle.entry[0].fullUrl", "The fullUrl must be an absolute URL (not 'Patient/1')"]])
  })

  withCatalog("a RESTful fullUrl ends with the resource's type and id", (c) => {
    const wrong = errors(validateResource(collection([{ fullUrl: "http://example.org/fhir/Patient/1", resource: patient("2") }]), c))
    expect(wrong.map((issue) => [issue.expression, issue.diagnostics])).toEqual([[
      "Bundle.entry[0]",
      "The fullUrl 'http://example.org/fhir/Patient/1' looks like a RESTful server URL, so it must end with the resource's type and id (/Patient/2)"
    ]])
    const noId = errors(validateResource(collection([{ fullUrl: "http://example.org/fhir/Patient/1", resource: patient() }]), c))
    expect(noId.map((issue) => issue.diagnostics)).toEqual(["The fullUrl 'http://example.org/fhir/Patient/1' looks like a RESTful server URL, but the resource has no id"])
    expect(errors(validateResource(collection([
      { fullUrl: "http://example.org/fhir/Patient/1", resource: patient("1") },
      { fullUrl: "urn:uuid:0b6d5bd8-1b2a-4c1e-9f0e-1a2b3c4d5e6f", resource: patient("2") }
    ]), c))).toEqual([])
  })

  withCatalog("a canonical url used as the fullUrl must end with the resource's id", (c) => {
    const valueSet = (id: string, url: string) => ({ resourceType: "ValueSet", id, text: narrative, url, status: "draft" })
    const found = errors(validateResource(collection([{ fullUrl: "http://example.org/vs/colours", resource: valueSet("v1", "http://example.org/vs/colours") }]), c))
    expect(found.map((issue) => issue.expression)).toEqual(["Bundle.entry[0]"])
    expect(found[0]!.diagnostics).toContain("The canonical URL (http://example.org/vs/colours) can only be the fullUrl when it ends with the resource's id")
    expect(errors(validateResource(collection([{ fullUrl: "http://example.org/fhir/ValueSet/v1", resource: valueSet("v1", "http://example.org/fhir/ValueSet/v1") }]), c))).toEqual([])
  })

  withCatalog("a reference that several entries answer is ambiguous", (c) => {
    const found = errors(validateResource(collection([
      { fullUrl: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf", resource: patient("a") },
      { fullUrl: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf", resource: patient("b") },
      { fullUrl: "urn:uuid:219e770b-67ba-5278-a0ba-f71dc9f2739a", resource: observation("o", { subject: { reference: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf" } }) }
    ]), c))
    expect(at(found, "Multiple matches")).toEqual(["Bundle.entry[2].resource.subject"])
  })
})

describe("references between entries", () => {
  const base = "http://example.org/fhir"

  withCatalog("relative references resolve against the entry's fullUrl, and the entry found has an allowed type", (c) => {
    const good = collection([
      { fullUrl: `${base}/Patient/p`, resource: patient("p") },
      { fullUrl: `${base}/Observation/o`, resource: observation("o", { subject: { reference: "Patient/p" } }) }
    ])
    expect(problems(c, good)).toEqual([])
    const wrongType = collection([
      { fullUrl: "urn:uuid:5d9588d8-3cd6-4b32-8fb7-ad13694e069d", resource: { resourceType: "Organization", text: narrative, name: "x" } },
      { fullUrl: "urn:uuid:54fc3e09-e279-4b74-a8ff-2649ec968642", resource: patient(undefined, { generalPractitioner: [{ reference: "Practitioner/5d9588d8-3cd6-4b32-8fb7-ad13694e069d" }] }) }
    ])
    expect(at(errors(validateResource(wrongType, c)), "names the type Practitioner, but the entry it matches in the Bundle is a resource of type Organization"))
      .toEqual(["Bundle.entry[1].resource.generalPractitioner[0]"])
    const notAllowed = collection([
      { fullUrl: `${base}/Organization/x`, resource: { resourceType: "Organization", id: "x", text: narrative, name: "x" } },
      { fullUrl: `${base}/Observation/o`, resource: observation("o", { specimen: { reference: `${base}/Organization/x` } }) }
    ])
    expect(at(errors(validateResource(notAllowed, c)), "resolves in the Bundle to a Organization, but only Specimen is allowed here"))
      .toEqual(["Bundle.entry[1].resource.specimen"])
  })

  withCatalog("a relative reference in an entry without a fullUrl cannot be resolved", (c) => {
    const transaction = {
      resourceType: "Bundle",
      type: "transaction",
      entry: [{ resource: observation("o", { subject: { reference: "Patient/p" } }), request: { method: "POST", url: "Observation" } }]
    }
    const found = errors(validateResource(transaction, c))
    expect(found.map((issue) => issue.expression)).toEqual(["Bundle.entry[0]", "Bundle.entry[0].resource.subject"])
    expect(found[1]!.diagnostics).toContain("the entry that holds it has no fullUrl")
    const response = { ...transaction, type: "transaction-response", entry: [{ resource: observation("o", { subject: { reference: "Patient/p" } }), response: { status: "201" } }] }
    expect(errors(validateResource(response, c))).toEqual([])
  })

  withCatalog("a relative reference that is not [type]/[id]", (c) => {
    const bundle = (type: string, reference: string) => ({
      resourceType: "Bundle",
      type,
      entry: [{ fullUrl: `${base}/Observation/o`, resource: observation("o", { subject: { reference } }), ...(type === "transaction" ? { request: { method: "POST", url: "Observation" } } : {}) }]
    })
    expect(at(errors(validateResource(bundle("collection", "Patient/p/extra"), c)), "must be [type]/[id], not 'Patient/p/extra'")).toEqual(["Bundle.entry[0].resource.subject"])
    expect(at(errors(validateResource(bundle("transaction", "Patient?identifier=x|1"), c)), "[type]/[id]")).toEqual([])
    expect(at(errors(validateResource(bundle("collection", "Patient?identifier=x|1"), c)), "[type]/[id]")).toEqual(["Bundle.entry[0].resource.subject"])
  })

  withCatalog("a versioned reference matches the entry with that meta.versionId", (c) => {
    const versioned = (versionId?: string) => collection([
      { fullUrl: `${base}/Patient/p`, resource: patient("p", versionId === undefined ? {} : { meta: { versionId } }) },
      { fullUrl: `${base}/Observation/o`, resource: observation("o", { subject: { reference: "Patient/p/_history/2" } }) }
    ])
    expect(problems(c, versioned("2"))).toEqual([])
    const missing = problems(c, versioned())
    expect(missing.map((issue) => [issue.severity, issue.expression])).toEqual([
      ["warning", "Bundle.entry[1].resource.subject"],
      ["warning", "Bundle.entry[1].resource.subject"]
    ])
    expect(missing[0]!.diagnostics).toContain("should state meta.versionId")
    expect(missing[1]!.diagnostics).toContain("Entry 0 has the type and id of Patient/p/_history/2")
  })

  withCatalog("a urn reference that no entry answers is a warning", (c) => {
    const found = problems(c, collection([{ fullUrl: "urn:uuid:219e770b-67ba-5278-a0ba-f71dc9f2739a", resource: observation("o", { subject: { reference: "urn:uuid:338c1081-0910-5650-a1ed-0c02154ad269" } }) }]))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([
      ["warning", "Bundle.entry[0].resource.subject", "The urn reference urn:uuid:338c1081-0910-5650-a1ed-0c02154ad269 is not the fullUrl of any entry in the Bundle"]
    ])
  })

  withCatalog("an entry that has the reference's type and id but another fullUrl is pointed out", (c) => {
    const found = problems(c, collection([
      { fullUrl: "http://other.org/fhir/Patient/p", resource: patient("p") },
      { fullUrl: `${base}/Observation/o`, resource: observation("o", { subject: { reference: "Patient/p" } }) }
    ]))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([[
      "warning",
      "Bundle.entry[1].resource.subject",
      `Entry 0 has the type and id of Patient/p, but its fullUrl http://other.org/fhir/Patient/p is not ${base}/Patient/p`
    ]])
  })
})

const composition = (extra: Record<string, unknown> = {}) => ({
  resourceType: "Composition",
  id: "c",
  text: narrative,
  status: "final",
  type: { text: "note" },
  date: "2020-01-01",
  title: "Note",
  author: [{ reference: "Practitioner/a" }],
  ...extra
})
const practitioner = { fullUrl: "http://example.org/fhir/Practitioner/a", resource: { resourceType: "Practitioner", id: "a", text: narrative } }
const document = (sections: ReadonlyArray<Record<string, unknown>>, more: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
  resourceType: "Bundle",
  type: "document",
  identifier: { system: "http://example.org/docs", value: "1" },
  timestamp: "2020-01-01T00:00:00Z",
  ...extra,
  entry: [
    { fullUrl: "http://example.org/fhir/Composition/c", resource: composition(sections.length === 0 ? {} : { section: sections }) },
    practitioner,
    ...more
  ]
})

describe("documents and messages", () => {
  withCatalog("the Composition's references must resolve inside the document", (c) => {
    const missing = errors(validateResource(document([{ title: "s", text: narrative, entry: [{ reference: "Observation/gone" }] }], []), c))
    expect(missing.map((issue) => [issue.expression, issue.diagnostics])).toEqual([
      ["Bundle.entry[0].resource.section[0].entry[0]", "Can't find 'Observation/gone' in the Bundle (Section.entry)"]
    ])
    const present = document([{ title: "s", text: narrative, entry: [{ reference: "Observation/o" }] }], [
      { fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o") }
    ])
    expect(errors(validateResource(present, c))).toEqual([])
  })

  withCatalog("a relative reference of the Composition does not resolve against a urn fullUrl", (c) => {
    const bundle = document([], [])
    bundle.entry[0] = { fullUrl: "urn:uuid:10a67a86-a9ec-427e-ba3f-f042cef21733", resource: composition() }
    bundle.entry[1] = { fullUrl: "urn:uuid:2aaf815f-3ebe-4a03-9b87-05d0700313b2", resource: practitioner.resource }
    const found = errors(validateResource(bundle, c)).filter((issue) => issue.expression === "Bundle.entry[0].resource.author[0]")
    expect(found.length).toBe(1)
    expect(found[0]!.diagnostics).toMatch(/^Can't find 'Practitioner\/a' in the Bundle \(Composition.author\): an entry has this type and id/)
  })

  withCatalog("every entry of a document is reachable from the Composition", (c) => {
    const orphan = document([], [{ fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o") }])
    const found = errors(validateResource(orphan, c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([[
      "Bundle.entry[2]",
      "Entry http://example.org/fhir/Observation/o cannot be reached by following references (forwards or backwards) from the Composition"
    ]])
    // A Provenance may point back at the Composition; anything else doing so is a warning.
    const provenance = { resourceType: "Provenance", id: "pv", text: narrative, target: [{ reference: "Composition/c" }], recorded: "2020-01-01T00:00:00Z", agent: [{ who: { reference: "Practitioner/a" } }] }
    expect(problems(c, document([], [{ fullUrl: "http://example.org/fhir/Provenance/pv", resource: provenance }]))).toEqual([])
    const backwards = problems(c, document([], [{ fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o", { focus: [{ reference: "Composition/c" }] }) }]))
    expect(backwards.map((issue) => [issue.severity, issue.expression])).toEqual([["warning", "Bundle.entry[2]"]])
    expect(backwards[0]!.diagnostics).toContain("only a Provenance may be linked that way")
  })

  withCatalog("the first entry of a document is a Composition, of a message a MessageHeader (bdl-11, bdl-12)", (c) => {
    const document = { resourceType: "Bundle", type: "document", identifier: { system: "http://example.org", value: "1" }, timestamp: "2020-01-01T00:00:00Z", entry: [{ fullUrl: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf", resource: patient("p") }] }
    expect(errors(validateResource(document, c)).map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: bdl-11:"])
    const message = { resourceType: "Bundle", type: "message", entry: [{ fullUrl: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf", resource: patient("p") }] }
    expect(errors(validateResource(message, c)).map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: bdl-12:"])
    const empty = { ...document, entry: undefined }
    expect(errors(validateResource(empty, c)).map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: bdl-11:"])
    const noResource = { ...document, entry: [{ fullUrl: "urn:uuid:7b8a1aaf-3455-5368-85ca-d82836b5cadf" }] }
    expect(at(errors(validateResource(noResource, c)), "The first entry of a document must have a resource")).toEqual(["Bundle.entry[0]"])
  })

  withCatalog("a message's focus resolves in the Bundle; an entry it does not reach is a warning", (c) => {
    const header = (focus: string) => ({
      resourceType: "MessageHeader",
      id: "h",
      text: narrative,
      eventCoding: { system: "http://example.org/events", code: "e" },
      source: { endpoint: "http://example.org/source" },
      focus: [{ reference: focus }]
    })
    const message = (focus: string, more: ReadonlyArray<Record<string, unknown>> = []) => ({
      resourceType: "Bundle",
      type: "message",
      entry: [{ fullUrl: "http://example.org/fhir/MessageHeader/h", resource: header(focus) }, { fullUrl: "http://example.org/fhir/Patient/p", resource: patient("p") }, ...more]
    })
    expect(problems(c, message("Patient/p"))).toEqual([])
    expect(errors(validateResource(message("Patient/q"), c)).map((issue) => [issue.expression, issue.diagnostics]))
      .toEqual([["Bundle.entry[0].resource.focus[0]", "Can't find 'Patient/q' in the Bundle (MessageHeader.focus)"]])
    const extra = problems(c, message("Patient/p", [{ fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o") }]))
    expect(extra.map((issue) => [issue.severity, issue.expression])).toEqual([["warning", "Bundle.entry[2]"]])
  })
})

describe("searchsets", () => {
  const searchset = (entry: ReadonlyArray<Record<string, unknown>>, self = "http://example.org/fhir/Patient?name=x") => ({
    resourceType: "Bundle",
    type: "searchset",
    ...(self === "" ? {} : { link: [{ relation: "self", url: self }] }),
    ...(entry.length === 0 ? {} : { entry })
  })

  withCatalog("a searchset should state its search in a self link", (c) => {
    const found = problems(c, searchset([], ""))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([["warning", "Bundle", "A searchset Bundle should have a self link that states the search"]])
    expect(problems(c, searchset([]))).toEqual([])
  })

  withCatalog("search modes: matches of the searched type with ids, includes with ids, outcomes are OperationOutcomes", (c) => {
    const found = errors(validateResource(searchset([
      { fullUrl: "http://example.org/fhir/Patient/1", resource: patient("1"), search: { mode: "match" } },
      { fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o"), search: { mode: "match" } },
      { fullUrl: "urn:uuid:22a67af3-3921-556e-9c32-ce5f4612ce57", resource: patient(), search: { mode: "include" } },
      { fullUrl: "urn:uuid:5ca08c93-591a-5f83-8928-dc834a0a67b6", resource: patient(), search: { mode: "outcome" } },
      { fullUrl: "urn:uuid:4bb77470-9f40-5433-acc7-6eefe09979a4", search: { mode: "match" } }
    ]), c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([
      ["Bundle.entry[1].resource", "A Observation is not a match for the search http://example.org/fhir/Patient?name=x (it asks for Patient)"],
      ["Bundle.entry[2].resource", "Search results must have ids"],
      ["Bundle.entry[3].resource", "An entry with search mode 'outcome' is an OperationOutcome, not a Patient"],
      ["Bundle.entry[4]", "The entries of a searchset Bundle must have resources"],
      ["Bundle.entry[4]", "Constraint failed: bdl-5: 'must be a resource unless there's a request or response'"]
    ])
  })

  withCatalog("without search modes, entries of another type than the search's are warnings", (c) => {
    const found = problems(c, searchset([
      { fullUrl: "http://example.org/fhir/Patient/1", resource: patient("1") },
      { fullUrl: "http://example.org/fhir/Observation/o", resource: observation("o") }
    ]))
    expect(found.map((issue) => [issue.severity, issue.expression])).toEqual([["warning", "Bundle.entry[1]"], ["warning", "Bundle"]])
    expect(found[1]!.diagnostics).toBe("The entries of a searchset Bundle should state their search mode")
  })
})

describe("references and canonicals", () => {
  withCatalog("a reference with whitespace is not a valid reference", (c) => {
    const found = errors(validateResource(observation("o", { subject: { reference: "Patient/ 1" } }), c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([["Observation.subject", "The reference 'Patient/ 1' is not a valid reference: it holds whitespace"]])
    expect(errors(validateResource(observation("o", { subject: { reference: "Patient/1" } }), c))).toEqual([])
  })

  withCatalog("Reference.type is a type the element allows and the type its URL names", (c) => {
    const notAllowed = errors(validateResource(observation("o", { specimen: { reference: "Specimen/1", type: "Patient" } }), c))
    expect(notAllowed.map((issue) => issue.diagnostics)).toEqual([
      "The type 'Patient' is not a valid target for this element (must be one of Specimen)",
      "Reference.type is 'Patient', but the reference Specimen/1 names a Specimen"
    ])
    expect(errors(validateResource(observation("o", { subject: { reference: "Patient/1", type: "Patient" } }), c))).toEqual([])
  })

  withCatalog("a Reference without reference, identifier or display is a warning", (c) => {
    const found = problems(c, observation("o", { subject: { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/data-absent-reason", valueCode: "unknown" }] } }))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([
      ["warning", "Observation.subject", "A Reference with neither a reference nor an identifier should have a display"]
    ])
    expect(problems(c, observation("o", { subject: { display: "someone" } }))).toEqual([])
  })

  withCatalog("a canonical naming a held resource of the wrong type", (c) => {
    const response = (questionnaire: string) => ({ resourceType: "QuestionnaireResponse", text: narrative, status: "completed", questionnaire })
    const found = errors(validateResource(response("http://hl7.org/fhir/ValueSet/administrative-gender"), c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([[
      "QuestionnaireResponse.questionnaire",
      "The canonical URL 'http://hl7.org/fhir/ValueSet/administrative-gender' refers to a ValueSet, where only Questionnaire is allowed"
    ]])
    expect(errors(validateResource(response("http://forms.test/Questionnaire/q"), c))).toEqual([])
  })

  withCatalog("the resources of a Parameters count as present for its references", (c) => {
    const parameters = {
      resourceType: "Parameters",
      parameter: [
        { name: "patient", resource: patient("p1") },
        { name: "group", part: [{ name: "observation", resource: observation("o", { subject: { reference: "Patient/p1" } }) }] }
      ]
    }
    const { references } = validateForWrite(parameters, c)
    expect(references.map((found) => [found.expression, found.local?.has(found.reference)])).toEqual([
      ["Parameters.parameter[1].part[0].resource.subject", true]
    ])
    const { references: alone } = validateForWrite(observation("o", { subject: { reference: "Patient/p1" } }), c)
    expect(alone[0]!.local).toBeUndefined()
  })
})

describe("contained resources and narrative links", () => {
  const binary = { resourceType: "Binary", id: "img", contentType: "image/png", data: "iVBORw0KGgo=" }
  const withDiv = (div: string) => ({
    resourceType: "Basic",
    code: { text: "x" },
    contained: [binary],
    text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">${div}</div>` }
  })

  withCatalog("a contained resource the narrative links to is referred to (dom-3)", (c) => {
    expect(errors(validateResource(withDiv('<img src="#img" alt="x"/>'), c))).toEqual([])
    expect(errors(validateResource(withDiv('<a href="#img">the image</a>'), c))).toEqual([])
    expect(errors(validateResource(withDiv("no link"), c)).map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: dom-3: "])
  })

  withCatalog("a narrative link that points at nothing is an error", (c) => {
    const found = problems(c, withDiv('<img src="#img" alt="x"/><a href="#nowhere">x</a>'))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([[
      "error",
      "Basic.text.div",
      "The narrative's link '#nowhere' points at nothing: no element, contained resource or anchor has the id 'nowhere'"
    ]])
    expect(problems(c, withDiv('<img src="#img" alt="x"/><a name="here"/><a href="#here">x</a>'))).toEqual([])
    // In a Bundle, anywhere in the Bundle.
    const inBundle = collection([
      { fullUrl: "urn:uuid:70c19c4a-3cec-5e0c-b659-d76257c63f37", resource: { ...patient("a"), text: { status: "generated", div: '<div xmlns="http://www.w3.org/1999/xhtml"><a href="#b">B</a></div>' } } },
      { fullUrl: "urn:uuid:414029ec-10ea-59a2-8fd2-89c59709abf1", resource: patient("b") }
    ])
    expect(problems(c, inBundle)).toEqual([])
  })

  withCatalog("two contained resources with the same id", (c) => {
    const twice = { ...withDiv('<img src="#img" alt="x"/>'), contained: [binary, { ...binary }] }
    const found = errors(validateResource(twice, c))
    expect(found.map((issue) => [issue.code, issue.expression, issue.diagnostics])).toEqual([["duplicate", "Basic.contained[1]", "Duplicate id for a contained resource: img"]])
  })

  withCatalog("resource ids, resource types of contained resources, and resourceType's JSON type", (c) => {
    const basic = (extra: Record<string, unknown>) => ({ resourceType: "Basic", text: narrative, code: { text: "x" }, ...extra })
    const long = "a".repeat(65)
    expect(errors(validateResource(basic({ id: long }), c)).map((issue) => issue.expression)).toEqual(["Basic.id"])
    expect(errors(validateResource(basic({ id: "a_b" }), c)).map((issue) => issue.diagnostics)).toEqual(["Invalid resource id 'a_b': an id is 1 to 64 letters, digits, '-' and '.'"])
    expect(errors(validateResource(basic({ id: "a-b.1" }), c))).toEqual([])
    const unknown = errors(validateResource(basic({ contained: [{ resourceType: "Nonsense", id: "n" }], author: { reference: "#n" } }), c))
    expect(unknown.map((issue) => [issue.expression, issue.diagnostics])).toContainEqual(["Basic.contained[0]", "Unknown resource type 'Nonsense'"])
    const notText = errors(validateResource(basic({ contained: [{ resourceType: 5, id: "n" }], author: { reference: "#n" } }), c))
    expect(notText.map((issue) => [issue.expression, issue.diagnostics])).toContainEqual(["Basic.contained[0]", "The resource has no resourceType"])
  })
})
