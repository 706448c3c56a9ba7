/**
 * The GraphQL schema of the R4 catalog (src/graphql/schema.ts): it is a valid schema, a GraphQL client's
 * introspection query loads it, its types follow FHIR GraphQL (choice elements, primitives with their `_` fields,
 * backbone elements, the Resource union), and a query for a resource by id is answered from its JSON, the
 * R4 example Patient with its extensions.
 */
import { buildClientSchema, getIntrospectionQuery, graphql, type GraphQLObjectType, validateSchema } from "graphql"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { buildSchema } from "../../src/graphql/schema.ts"
import { loadCatalog } from "../validation/support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
})

const fieldsOf = (schema: ReturnType<typeof buildSchema>, type: string) => (schema.getType(type) as GraphQLObjectType).getFields()

describe("the GraphQL schema of the R4 catalog", () => {
  it("is a valid schema that introspection loads, with every resource type", async () => {
    if (catalog === undefined) return
    const schema = buildSchema(catalog)
    expect(validateSchema(schema)).toEqual([])
    const introspection = await graphql({ schema, source: getIntrospectionQuery() })
    expect(introspection.errors).toBeUndefined()
    const client = buildClientSchema(introspection.data as any)
    for (const type of ["Patient", "Observation", "Bundle", "StructureDefinition", "HumanName", "Quantity", "Extension"]) {
      expect([type, client.getType(type)?.name]).toEqual([type, type])
    }
    const root = (client.getType("Query") as GraphQLObjectType).getFields()
    expect(Object.keys(root).length).toBe(3 * catalog.resourceTypes.length)
    // TypeList takes the type's search parameters, a '-' written '_', and _count and _sort.
    const list = root["ObservationList"]!.args.map((arg) => arg.name)
    expect(list).toEqual(expect.arrayContaining(["code", "value_quantity", "patient", "_id", "_count", "_sort"]))
    expect(String(root["ObservationList"]!.type)).toBe("[Observation]")
    expect(String(root["ObservationConnection"]!.type)).toBe("ObservationConnection")
    expect(root["ObservationConnection"]!.args.map((arg) => arg.name)).toEqual(expect.arrayContaining(["code", "_cursor", "_offset", "fhirpath"]))
    // Each resource has the reverse references of the types that may refer to it.
    const patient = (client.getType("Patient") as GraphQLObjectType).getFields()
    expect(patient["ObservationList"]!.args.map((arg) => arg.name)).toEqual(["_reference", "_filter", "_sort", "_count", "_offset", "fhirpath"])
    expect(String(patient["ConditionConnection"]!.type)).toBe("ConditionConnection")
    // A repeating element's field takes its items' primitive sub-elements as filters.
    expect(patient["name"]!.args.map((arg) => arg.name)).toEqual(expect.arrayContaining(["use", "family", "given", "fhirpath", "_offset", "_count"]))
    expect((client.getType("Element") as GraphQLObjectType).getFields()["extension"]!.args.map((arg) => arg.name)).toEqual(["id", "url", "fhirpath", "_offset", "_count"])
  })

  it("names fields as FHIR JSON does: choices by type, primitives with their _ fields, lists, backbone types, the Resource union", () => {
    if (catalog === undefined) return
    const schema = buildSchema(catalog)
    const observation = fieldsOf(schema, "Observation")
    expect(String(observation["valueQuantity"]!.type)).toBe("Quantity")
    expect(String(observation["valueString"]!.type)).toBe("String")
    expect(String(observation["_valueString"]!.type)).toBe("Element")
    expect(String(observation["component"]!.type)).toBe("[ObservationComponent]")
    expect(String(fieldsOf(schema, "ObservationComponent")["referenceRange"]!.type)).toBe("[ObservationReferenceRange]")
    expect(observation["value"]).toBeUndefined()
    const patient = fieldsOf(schema, "Patient")
    expect(String(patient["birthDate"]!.type)).toBe("String")
    expect(String(patient["_birthDate"]!.type)).toBe("Element")
    expect(String(patient["active"]!.type)).toBe("Boolean")
    expect(String(patient["multipleBirthInteger"]!.type)).toBe("Int")
    expect(String(patient["name"]!.type)).toBe("[HumanName]")
    expect(String(patient["contact"]!.type)).toBe("[PatientContact]")
    expect(String(patient["contained"]!.type)).toBe("[Resource]")
    expect(String(patient["resourceType"]!.type)).toBe("String")
    expect(String(fieldsOf(schema, "HumanName")["given"]!.type)).toBe("[String]")
    expect(String(fieldsOf(schema, "HumanName")["_given"]!.type)).toBe("[Element]")
    expect(String(fieldsOf(schema, "Quantity")["value"]!.type)).toBe("Float")
    expect(String(fieldsOf(schema, "Element")["extension"]!.type)).toBe("[Extension]")
  })

  it("answers a query for a resource by id from its JSON, extensions and _ fields included", async () => {
    if (catalog === undefined) return
    // Of the R4 example Patient (patient-example.json), as stored.
    const patient = {
      resourceType: "Patient",
      id: "example",
      active: true,
      name: [
        { use: "official", family: "Chalmers", given: ["Peter", "James"] },
        { use: "usual", given: ["Jim"] },
        { use: "maiden", family: "Windsor", given: ["Peter", "James"], period: { end: "2002" } }
      ],
      gender: "male",
      birthDate: "1974-12-25",
      _birthDate: { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-birthTime", valueDateTime: "1974-12-25T14:35:45-05:00" }] }
    }
    const schema = buildSchema(catalog)
    const searched: Array<string> = []
    const contextValue = {
      read: async (type: string, id: string) => {
        if (type === "Patient" && id === "example") return patient
        throw new Error(`${type}/${id} is not known`)
      },
      search: async (type: string, params: URLSearchParams) => {
        searched.push(`${type}?${params}`)
        return { matches: [patient], total: undefined, count: 5, offset: 0, links: [] }
      },
      resolve: async (reference: string) => {
        if (reference === "Patient/example") return patient
        throw new Error(`${reference} is not known`)
      }
    }
    const result = await graphql({
      schema,
      contextValue,
      source: `{ Patient(id: "example") { id active birthDate _birthDate { extension { url valueDateTime } } name { use family given } } missing: Patient(id: "nobody") { id } }`
    })
    expect(result.errors?.map((error) => [error.message, error.path])).toEqual([["Patient/nobody is not known", ["missing"]]])
    expect(result.data).toEqual({
      Patient: {
        id: "example",
        active: true,
        birthDate: "1974-12-25",
        _birthDate: { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-birthTime", valueDateTime: "1974-12-25T14:35:45-05:00" }] },
        name: [
          { use: "official", family: "Chalmers", given: ["Peter", "James"] },
          { use: "usual", family: null, given: ["Jim"] },
          { use: "maiden", family: "Windsor", given: ["Peter", "James"] }
        ]
      },
      missing: null
    })
    const list = await graphql({ schema, contextValue, source: `{ PatientList(family: "Chalmers", birthdate: "ge1970", _count: 5) { id } }` })
    expect(list.data).toEqual({ PatientList: [{ id: "example" }] })
    expect(searched).toEqual(["Patient?birthdate=ge1970&family=Chalmers&_count=5"])
    const unknown = await graphql({ schema, contextValue, source: `{ Patient(id: "example") { colour } }` })
    expect(unknown.errors?.[0]?.message).toBe('Cannot query field "colour" on type "Patient".')
  })
})
