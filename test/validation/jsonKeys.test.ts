/** A JSON object that names a property twice: found in the text, whatever `JSON.parse` kept. */
import { layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { duplicateKeys } from "../../src/validation/jsonKeys.ts"
import { validateJson } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const repeats = (text: string) => duplicateKeys(text, JSON.parse(text)).map((d) => d.path)

describe("repeated JSON properties", () => {
  it("finds a property named twice in one object, at any depth, with its path", () => {
    expect(repeats('{"resourceType":"Patient","gender":"male","gender":"female"}')).toEqual(["Patient.gender"])
    expect(repeats('{"resourceType":"Patient","name":[{"given":["a"]},{"family":"b", "given":["c"],\n  "family" : "d"}]}')).toEqual(["Patient.name[1].family"])
    expect(repeats('{"resourceType":"Patient","contained":[{"resourceType":"Organization","name":"a","na\\u006de":"b"}]}')).toEqual(["Patient.contained[0].name"])
  })

  it("finds none where names repeat only across objects, or where strings hold quotes and colons", () => {
    expect(repeats('{"resourceType":"Patient","name":[{"family":"a"},{"family":"b"}],"text":{"div":"<div>\\"x\\": 1</div>"}}')).toEqual([])
    // A string value that starts with a colon looks like a property name to the quick count: the close read finds no repeat.
    expect(repeats('{"resourceType":"Basic","code":{"text":":"},"id":"x","extension":[{"url":"http://x","valueString":": y"}]}')).toEqual([])
    expect(repeats('{"a\\\\":1,"b":"\\\\"}')).toEqual([])
    expect(repeats("[1,2]")).toEqual([])
  })

  withCatalog("a property named twice is an error of $validate's text, at its path", (c) => {
    const issues = validateJson('{"resourceType":"Patient","active":true,"active":false}', c)
    const repeated = issues.filter((issue) => issue.diagnostics.includes("appears more than once"))
    expect(repeated.map((issue) => [issue.severity, issue.expression, issue.diagnostics])).toEqual([
      ["error", "Patient.active", "The JSON property 'active' appears more than once in the same object (Patient.active): only its last value would be kept"]
    ])
    expect(validateJson('{"resourceType":"Patient","active":true}', c).filter((issue) => issue.diagnostics.includes("appears more than once"))).toEqual([])
  })
})

class Server extends Context.Tag("test/JsonKeysServer")<Server, TestServer>() {}

describe.skipIf(skipRealPackages)("a written body with a property named twice", () => {
  const conformance = { package_registry: registryUrl ?? "", package_cache: realPackageCache }
  layer(Layer.scoped(Server, startServer("sqlite", { conformance })), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("is refused with 400 naming the property and where it is, before anything is written", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const transaction = '{"resourceType":"Bundle","type":"transaction","entry":[{"resource":{"resourceType":"Basic","text":{"status":"generated","div":"<div xmlns=\\"http://www.w3.org/1999/xhtml\\">a</div>"},' +
          '"code":{"text":"a"},"code":{"text":"b"}},' +
          '"request":{"method":"POST","url":"Basic"}}]}'
        const refused = yield* call("POST", base, { body: transaction })
        expect(refused.status).toBe(400)
        expect(refused.json.issue[0].severity).toBe("error")
        expect(refused.json.issue[0].expression).toEqual(["Bundle.entry[0].resource.code"])
        expect(refused.json.issue[0].diagnostics).toContain("The JSON property 'code' appears more than once")
        const fine = yield* call("POST", base, { body: transaction.replace(',"code":{"text":"b"}', "") })
        expect(fine.status).toBe(200)
      }))
  })
})
