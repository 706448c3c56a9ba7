/**
 * JSON → XML → JSON over every resource of `hl7.fhir.r4.examples@4.0.1` (the package ships no XML).
 *
 * Narratives written with CRLF line ends (seven resources of the package) come back with them: each CR is
 * written as `&#xD;`, which XML keeps, where a raw CR would read back as a line end (src/rest/xml/xmlText.ts).
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

const roundTrip = (files: ReadonlyArray<ExampleFile>, pretty: boolean) => {
  const failures: Array<string> = []
  let exact = 0
  let crlf = 0
  for (const { file, resource } of files) {
    const back = fromXml(toXml(resource, catalog, { pretty }), catalog)
    if (Either.isLeft(back)) failures.push(`${file}: ${back.left.message}`)
    else if (isDeepStrictEqual(back.right, resource)) exact++
    else failures.push(`${file}: differs`)
    if (JSON.stringify(resource).includes("\\r")) crlf++
  }
  return { failures, exact, crlf }
}

describe("JSON → XML → JSON over the R4 examples package", () => {
  it("gives back every resource of the package", (context) => {
    if (examples === undefined) return context.skip()
    const { exact, failures, crlf } = roundTrip(examples, false)
    console.log(`XML round trip: ${exact} of ${examples.length} resources equal, ${crlf} of them holding CRs`)
    expect(failures).toEqual([])
    expect(examples.length).toBeGreaterThan(5000)
    expect(crlf).toBeGreaterThan(0)
  }, 300_000)

  it("gives back every resource that is not a conformance resource from pretty-printed XML too", (context) => {
    if (examples === undefined) return context.skip()
    const instances = examples.filter(({ resource }) => !conformanceTypes.has(String(resource["resourceType"])))
    const { exact, failures } = roundTrip(instances, true)
    console.log(`XML round trip, pretty-printed: ${exact} of ${instances.length} resources equal`)
    expect(failures).toEqual([])
  }, 300_000)
})
