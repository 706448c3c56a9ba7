/**
 * FHIR GraphQL's data-flattening directives (src/graphql/directives.ts, docs/graphql.md) on the R4 schema and the
 * R4 example Patient (Patient/example): the specification's own examples give exactly its outputs, and aliases,
 * @skip and @include, fragments, nested slices, a slice path without a value or with several, errors, and a query
 * without these directives, which is answered as GraphQL executed it.
 */
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { execute, type ExecutionResult, type GraphQLSchema, parse, validate } from "graphql"
import { beforeAll, describe, expect, it } from "vitest"
import { reshape, type SliceKeys } from "../../src/graphql/directives.ts"
import { buildSchema, type GraphQLContext } from "../../src/graphql/schema.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { cacheDir } from "../support/r4Examples.ts"
import { loadCatalog } from "../validation/support.ts"

let schema: GraphQLSchema | undefined
const resources = new Map<string, Record<string, unknown>>()

beforeAll(async () => {
  const catalog = await loadCatalog()
  if (catalog === undefined) return
  schema = buildSchema(catalog)
  // The R4 example Patient, as the examples package (which the catalog was built from) holds it.
  const patient = JSON.parse(await readFile(join(cacheDir, "hl7.fhir.r4.examples-4.0.1", "package", "Patient-example.json"), "utf8"))
  resources.set("Patient/example", patient)
  resources.set("Patient/with-contained", {
    resourceType: "Patient",
    id: "with-contained",
    contained: [
      { resourceType: "Practitioner", id: "doc", name: [{ family: "Doc", given: ["A"] }, { family: "Doctor", given: ["B"] }] },
      { resourceType: "Patient", id: "kin", name: [{ family: "Kin" }, { family: "Kith" }] }
    ]
  })
}, 300_000)

/** Executes `query` as /graphql does (execution, then reshaping), reading (and searching) the resources above. */
const run = async (query: string, variables?: Record<string, unknown>): Promise<{ readonly executed: ExecutionResult; readonly result: ExecutionResult }> => {
  const document = parse(query)
  expect(validate(schema!, document)).toEqual([])
  const slices: SliceKeys = new Map()
  const contextValue: GraphQLContext = {
    read: async (type, id) => {
      const found = resources.get(`${type}/${id}`)
      if (found === undefined) throw new Error(`${type}/${id} is not known`)
      return found
    },
    search: async (type) => ({
      matches: [...resources.values()].filter((resource) => resource["resourceType"] === type),
      total: undefined,
      count: 20,
      offset: 0,
      links: []
    }),
    resolve: () => Promise.reject(new Error("no references here")),
    create: () => Promise.reject(new Error("no writes here")),
    update: () => Promise.reject(new Error("no writes here")),
    delete: () => Promise.reject(new Error("no writes here")),
    slices
  }
  const executed = await execute({ schema: schema!, document, contextValue, ...(variables === undefined ? {} : { variableValues: variables }) })
  return { executed, result: reshape(document, undefined, executed, slices, variables) }
}

/** The reshaped answer's Patient, as JSON text (so that the order of its fields is compared too). */
const patientOf = async (selection: string): Promise<string> => {
  const { result } = await run(`{ Patient(id: "example") { ${selection} } }`)
  expect(result.errors).toBeUndefined()
  return JSON.stringify((result.data as Record<string, unknown>)["Patient"])
}

const errorsOf = (result: ExecutionResult) => result.errors?.map((error) => [error.message, error.path])

describe.skipIf(skipRealPackages)("the data-flattening directives", () => {
  it("give the specification's outputs for its examples on Patient/example", async () => {
    expect(await patientOf(`identifier @flatten { system value } active name @flatten { text given family }`)).toBe(
      `{"system":["urn:oid:1.2.36.146.595.217.0.1"],"value":["12345"],"active":true,"given":["Peter","James","Jim","Peter","James"],"family":["Chalmers","Windsor"]}`
    )
    expect(await patientOf(`name @flatten { text given @first family }`)).toBe(`{"given":["Peter","Jim","Peter"],"family":["Chalmers","Windsor"]}`)
    expect(await patientOf(`identifier @flatten { system @singleton value @singleton } active name @flatten @first { text given family @singleton }`)).toBe(
      `{"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345","active":true,"given":["Peter","James"],"family":"Chalmers"}`
    )
    expect(await patientOf(`name @flatten @slice(path: "use") { given family @singleton }`)).toBe(
      `{"given.official":["Peter","James"],"family.official":"Chalmers","given.usual":["Jim"],"given.maiden":["Peter","James"],"family.maiden":"Windsor"}`
    )
    expect(await patientOf(`name @flatten @slice(path: "$index") { given family @singleton }`)).toBe(
      `{"given.0":["Peter","James"],"family.0":"Chalmers","given.1":["Jim"],"given.2":["Peter","James"],"family.2":"Windsor"}`
    )
    // And the example of docs/graphql.md, which joins them.
    expect(await patientOf(`identifier @flatten { system @singleton value @singleton } active name @flatten @slice(path: "use") { given family @singleton }`)).toBe(
      `{"system":"urn:oid:1.2.36.146.595.217.0.1","value":"12345","active":true,"given.official":["Peter","James"],"family.official":"Chalmers",` +
        `"given.usual":["Jim"],"given.maiden":["Peter","James"],"family.maiden":"Windsor"}`
    )
  })

  it("name outputs by alias, and keep a field's own shape outside a repeating @flatten", async () => {
    const { result } = await run(`{ p: Patient(id: "example") { ids: identifier @flatten { sys: system } names: name @flatten { first: given @first surname: family } } }`)
    expect(JSON.stringify(result.data)).toBe(`{"p":{"sys":["urn:oid:1.2.36.146.595.217.0.1"],"first":["Peter","Jim","Peter"],"surname":["Chalmers","Windsor"]}}`)
    // @first alone: the field holds the first element, not a list; @flatten of a field that does not repeat keeps
    // its children's shapes, leaving out those without a value.
    expect(await patientOf(`name @first { family given } telecom @first { use } managingOrganization @flatten { reference display }`)).toBe(
      `{"name":{"family":"Chalmers","given":["Peter","James"]},"telecom":{"use":"home"},"reference":"Organization/1"}`
    )
    // A list not flattened, its elements' objects with nested lists of their own.
    expect(await patientOf(`contact @flatten { telecom { value } name { given } }`)).toBe(
      `{"telecom":[{"value":"+33 (237) 998327"}],"name":[{"given":["Bénédicte"]}]}`
    )
  })

  it("honour @skip and @include, with variables and their defaults", async () => {
    const query = `query Q($noGiven: Boolean!, $withFamily: Boolean = false) { Patient(id: "example") { name @flatten { given @skip(if: $noGiven) family @include(if: $withFamily) use } } }`
    const skipped = await run(query, { noGiven: true })
    expect(JSON.stringify(skipped.result.data)).toBe(`{"Patient":{"use":["official","usual","maiden"]}}`)
    const kept = await run(query, { noGiven: false, withFamily: true })
    expect(JSON.stringify(kept.result.data)).toBe(
      `{"Patient":{"given":["Peter","James","Jim","Peter","James"],"family":["Chalmers","Windsor"],"use":["official","usual","maiden"]}}`
    )
    // The @first of a skipped node does not apply to the same field selected again.
    const merged = await run(`{ Patient(id: "example") { name @first @skip(if: true) { family } name { use } } }`)
    expect(JSON.stringify(merged.result.data)).toBe(`{"Patient":{"name":[{"use":"official"},{"use":"usual"},{"use":"maiden"}]}}`)
    const dropped = await run(`{ Patient(id: "example") { name @flatten @include(if: false) { family } active } }`)
    expect(JSON.stringify(dropped.result.data)).toBe(`{"Patient":{"active":true}}`)
  })

  it("report a @singleton with several values as an error at its path, the value null", async () => {
    const { result } = await run(`{ Patient(id: "example") { name @flatten { family @singleton use } } }`)
    expect(result.data).toEqual({ Patient: { family: null, use: ["official", "usual", "maiden"] } })
    expect(errorsOf(result)).toEqual([['@singleton: "family" has 2 values', ["Patient", "family"]]])
  })

  it("add nested slice names one after the other, and slice a list that is not flattened", async () => {
    expect(await patientOf(`name @flatten @slice(path: "use") { given @slice(path: "$index") }`)).toBe(
      `{"given.official.0":["Peter"],"given.official.1":["James"],"given.usual.0":["Jim"],"given.maiden.0":["Peter"],"given.maiden.1":["James"]}`
    )
    expect(await patientOf(`name @slice(path: "use") { family }`)).toBe(
      `{"name.official":[{"family":"Chalmers"}],"name.usual":[{"family":null}],"name.maiden":[{"family":"Windsor"}]}`
    )
    expect(await patientOf(`name @first @slice(path: "use") { family }`)).toBe(`{"name.official":{"family":"Chalmers"}}`)
    // A FHIRPath expression, evaluated on each element, $index its index.
    expect(await patientOf(`name @flatten @slice(path: "iif($index = 0, 'first', use)") { family @singleton }`)).toBe(
      `{"family.first":"Chalmers","family.maiden":"Windsor"}`
    )
    // A choice element by its name, as FHIRPath reads it on the element's type (Extension).
    expect(await patientOf(`_birthDate { extension @flatten @slice(path: "value.substring(0, 4)") { valueDateTime @singleton } }`)).toBe(
      `{"_birthDate":{"valueDateTime.1974":"1974-12-25T14:35:45-05:00"}}`
    )
    // An element for which the path gives no value adds no name.
    expect(await patientOf(`name @flatten @slice(path: "family") { given }`)).toBe(
      `{"given.Chalmers":["Peter","James"],"given":["Jim"],"given.Windsor":["Peter","James"]}`
    )
  })

  it("report a slice path that is not FHIRPath, or gives several values, as an error of the field", async () => {
    const broken = await run(`{ Patient(id: "example") { name @flatten @slice(path: "use)") { family } active } }`)
    expect(broken.result.data).toEqual({ Patient: { active: true } })
    expect(errorsOf(broken.result)).toEqual([[expect.stringMatching(/^@slice\(path: "use\)"\) is not a FHIRPath expression: .*column: 3/), ["Patient", "name"]]])
    const several = await run(`{ Patient(id: "example") { name @flatten @slice(path: "given") { family } } }`)
    expect(errorsOf(several.result)).toEqual([['@slice(path: "given") gives 2 values for element 0; it may give one at most', ["Patient", "name"]]])
    const object = await run(`{ Patient(id: "example") { name @slice(path: "period") { family } } }`)
    expect(errorsOf(object.result)).toEqual([['@slice(path: "period") gives element 2 a value that is not a primitive', ["Patient", "name"]]])
  })

  it("report directives where they cannot apply, and two fields giving one output name", async () => {
    const { result } = await run(`{ Patient(id: "example") { gender @slice(path: "$this") active @flatten id managingOrganization @flatten { id: reference } } }`)
    expect(result.data).toEqual({ Patient: { gender: "male", active: true, id: null } })
    expect(errorsOf(result)).toEqual([
      ['@slice on "gender": only a repeating field can be sliced', ["Patient", "gender"]],
      ['@flatten on "active": only a field with a selection of fields can be flattened', ["Patient", "active"]],
      ['Two fields give the output name "id" (after @flatten); give one of them an alias', ["Patient", "id"]]
    ])
  })

  it("follow fragments, each type's own for the resources of the Resource union", async () => {
    const { result } = await run(`
      { Patient(id: "with-contained") { ...people } }
      fragment people on Patient {
        contained @flatten {
          __typename
          ... on Practitioner { name @first { family } }
          ... on Patient { name { family } }
        }
      }`)
    expect(errorsOf(result)).toBeUndefined()
    expect(JSON.stringify(result.data)).toBe(`{"Patient":{"__typename":["Practitioner","Patient"],"name":[{"family":"Doc"},{"family":"Kin"},{"family":"Kith"}]}}`)
    const sliced = await run(`{ Patient(id: "with-contained") { contained @flatten @slice(path: "id") { __typename } } }`)
    expect(JSON.stringify(sliced.result.data)).toBe(`{"Patient":{"__typename.doc":["Practitioner"],"__typename.kin":["Patient"]}}`)
    const named = await run(`{ Patient(id: "example") { ...names } } fragment names on Patient { name @flatten { ... on HumanName { family @first } } }`)
    expect(JSON.stringify(named.result.data)).toBe(`{"Patient":{"family":["Chalmers","Windsor"]}}`)
  })

  it("slice and flatten the matches of a search (TypeList)", async () => {
    const { result } = await run(`{ PatientList @flatten @slice(path: "id") { active gender @singleton } }`)
    expect(JSON.stringify(result.data)).toBe(`{"active.example":[true],"gender.example":"male"}`)
  })

  it("answer a query without them as GraphQL executed it", async () => {
    const { executed, result } = await run(`{ Patient(id: "example") { name { family given } active @include(if: true) gender @skip(if: true) } }`)
    expect(result).toBe(executed)
    expect(result.data).toEqual({ Patient: { name: [{ family: "Chalmers", given: ["Peter", "James"] }, { family: null, given: ["Jim"] }, { family: "Windsor", given: ["Peter", "James"] }], active: true } })
  })
})
