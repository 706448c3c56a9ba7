/**
 * JSON → XML → JSON over every resource of `hl7.fhir.r4.examples@4.0.1` (the package ships no XML).
 *
 * The one distinction XML cannot keep: line ends inside the narrative. XHTML is XML, where `\r\n` and `\r`
 * in markup mean `\n` (https://www.w3.org/TR/xml/#sec-line-ends), so a JSON `div` written with CRLF reads back
 * with LF, the same XHTML. Those resources are compared with their narratives' line ends normalised.
 */
import { isDeepStrictEqual } from "node:util"
import { Either } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { build, type Catalog } from "../../../src/catalog/Catalog.ts"
import { fromXml } from "../../../src/rest/xml/fromXml.ts"
import { toXml } from "../../../src/rest/xml/toXml.ts"
import { conformanceTypes } from "../../../src/packages/LoadedPackage.ts"
import { type ExampleFile, loadR4Conformance, loadR4Examples } from "../../support/r4Examples.ts"

let catalog: Catalog
let examples: ReadonlyArray<ExampleFile> | undefined

beforeAll(async () => {
  examples = await loadR4Examples("XML round-trip test")
  const conformance = await loadR4Conformance()
  if (examples === undefined || conformance === undefined) examples = undefined
  else catalog = build(conformance, 1)
}, 300_000)

const crlf = /\r\n?/g

/** A copy with every narrative's line ends as XML reads them. */
const normaliseNarrative = (value: unknown, key = ""): unknown => {
  if (typeof value === "string") return key === "div" ? value.replace(crlf, "\n") : value
  if (Array.isArray(value)) return value.map((item) => normaliseNarrative(item))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normaliseNarrative(v, k)]))
  }
  return value
}

const roundTrip = (files: ReadonlyArray<ExampleFile>, pretty: boolean) => {
  const failures: Array<string> = []
  const normalised: Array<string> = []
  let exact = 0
  for (const { file, resource } of files) {
    const back = fromXml(toXml(resource, catalog, { pretty }), catalog)
    if (Either.isLeft(back)) failures.push(`${file}: ${back.left.message}`)
    else if (isDeepStrictEqual(back.right, resource)) exact++
    else if (isDeepStrictEqual(back.right, normaliseNarrative(resource))) normalised.push(file)
    else failures.push(`${file}: differs`)
  }
  return { failures, normalised, exact }
}

describe("JSON → XML → JSON over the R4 examples package", () => {
  it("gives back every resource of the package", (context) => {
    if (examples === undefined) return context.skip()
    const { exact, failures, normalised } = roundTrip(examples, false)
    console.log(
      `XML round trip: ${exact + normalised.length} of ${examples.length} resources equal, ${exact} exactly, ` +
        `${normalised.length} after narrative line-end normalisation (${normalised.join(", ")})`
    )
    expect(failures).toEqual([])
    expect(examples.length).toBeGreaterThan(5000)
    expect(normalised.length).toBeLessThan(20)
  }, 300_000)

  it("gives back every resource that is not a conformance resource from pretty-printed XML too", (context) => {
    if (examples === undefined) return context.skip()
    const instances = examples.filter(({ resource }) => !conformanceTypes.has(String(resource["resourceType"])))
    const { exact, failures, normalised } = roundTrip(instances, true)
    console.log(`XML round trip, pretty-printed: ${exact + normalised.length} of ${instances.length} resources equal`)
    expect(failures).toEqual([])
  }, 300_000)
})
