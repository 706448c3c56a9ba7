import { describe, expect } from "vitest"
import { regexes } from "../../src/validation/primitives.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const samples = [
  "", " ", "a", "abc", "a b", "a  b", " a", "a ", "A-Z.09", "x".repeat(64), "x".repeat(65), "a_b", "a/b",
  "2020", "2020-01", "2020-13", "2020-01-01", "2020-1-1", "0000", "0001", "1000-01-01", "2020-01-32",
  "2020-01-01T10:00:00Z", "2020-01-01T10:00:00", "2020-01-01T10:00:00.123+05:30", "2020-01-01T24:00:00Z",
  "2020-01-01T10:00:00+14:00", "2020-01-01T10:00:00+14:30", "10:00:00", "10:00", "23:59:60.5",
  "urn:oid:1.2.3", "urn:oid:1.02", "urn:uuid:9d3f2d3e-6c56-4f0f-8f4b-1d2c3b4a5e6f", "urn:uuid:9D3F2D3E-6C56-4F0F-8F4B-1D2C3B4A5E6F",
  "aGVsbG8=", "aGVsbG8", "...", "YQ==\nYQ==", "0", "-0", "1", "-1", "01", "1.5", "1e3", "-1.50E-2", "true", "false",
  "http://example.org/a b", "http://example.org/a", "line\nbreak", "tab\there"
]

/** Of the R4 primitive types, those written as JSON strings, whose regex the validator applies itself. */
const textual = ["base64Binary", "canonical", "code", "date", "dateTime", "id", "instant", "markdown", "oid", "string", "time", "uri", "url", "uuid"]

describe("primitive regexes", () => {
  withCatalog("the built-in regexes agree with those of the R4 primitive StructureDefinitions", (c) => {
    for (const type of textual) {
      const sd = c.structureDefinitionForType(type)!
      const element = sd.snapshot!.element.find((e) => e.path === `${type}.value`)!
      const types = element.json["type"] as ReadonlyArray<{ extension?: ReadonlyArray<{ url: string; valueString?: string }> }>
      const published = types[0]?.extension?.find((e) => e.url === "http://hl7.org/fhir/StructureDefinition/regex")?.valueString
      expect(published, type).toBeDefined()
      const theirs = new RegExp(`^(?:${published})$`)
      const ours = new RegExp(`^(?:${regexes[type]})$`)
      for (const sample of samples) expect(ours.test(sample), `${type} ${JSON.stringify(sample)}`).toBe(theirs.test(sample))
    }
  })
})
