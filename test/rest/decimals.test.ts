/**
 * FHIR decimals keep their text (https://hl7.org/fhir/R4/datatypes.html#decimal: "the precision of the decimal
 * value has significance"): `105.00` comes back as `105.00` in every format and through every interaction, on
 * every storage kind; number search reads a value's precision (https://hl7.org/fhir/R4/search.html#number).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/DecimalsServer")<Server, TestServer>() {}

const decimals = ["105.00", "-83.694710", "1.50E+3", "1.0E-2", "0.10000000000000000001", "-0.0"]

/** An Observation holding the decimals above, as JSON text (JSON.stringify would lose them). */
const observationText = (id?: string) => `{"resourceType":"Observation",${id === undefined ? "" : `"id":"${id}",`}"status":"final",` +
  `"code":{"text":"decimals"},"valueQuantity":{"value":105.00,"unit":"mg"},"component":[` +
  `{"code":{"text":"a"},"valueQuantity":{"value":-83.694710}},{"code":{"text":"b"},"valueQuantity":{"value":1.50E+3}},` +
  `{"code":{"text":"c"},"valueQuantity":{"value":1.0E-2}},{"code":{"text":"d"},"valueQuantity":{"value":0.10000000000000000001}},` +
  `{"code":{"text":"e"},"valueQuantity":{"value":-0.0}}]}`

/** The numbers in JSON text (in value position), as written. */
const jsonNumbers = (text: string): ReadonlyArray<string> =>
  [...text.matchAll(/[:,[]\s*(-?\d[\d.eE+-]*)(?=[\s,}\]])/g)].map((m) => m[1]!)

/** The `value` attributes of FHIR XML that hold numbers. */
const xmlNumbers = (text: string): ReadonlyArray<string> => [...text.matchAll(/<value value="(-?\d[^"]*)"/g)].map((m) => m[1]!)

const xml = { accept: "application/fhir+xml" }

for (const backend of backends) {
  describe.skipIf(backend.skip || skipRealPackages)(`decimals on ${backend.kind}`, () => {
    const conformance = { package_registry: registryUrl ?? "", package_cache: realPackageCache }
    layer(Layer.scoped(Server, startServer(backend.kind, { conformance })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("keep their text through create, update, read, vread, history, search, _pretty, _summary, _elements and XML", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Observation`, { body: observationText() })
          expect(created.status).toBe(201)
          expect(jsonNumbers(created.text)).toEqual(decimals)
          const id = created.json.id as string
          const url = `${base}/Observation/${id}`
          const updated = yield* call("PUT", url, { body: observationText(id) })
          expect(updated.status).toBe(200)
          expect(jsonNumbers(updated.text)).toEqual(decimals)
          for (const path of [url, `${url}/_history/1`, `${url}/_history/2`, `${url}?_pretty=true`, `${url}?_summary=true`, `${url}?_elements=valueQuantity,component`]) {
            const reply = yield* call("GET", path)
            expect(reply.status, path).toBe(200)
            expect(jsonNumbers(reply.text), path).toEqual(decimals)
          }
          expect((yield* call("GET", `${url}?_pretty=true`)).text).toContain(`"value": 105.00`)
          expect(jsonNumbers((yield* call("GET", `${url}?_elements=valueQuantity`)).text)).toEqual(["105.00"])
          for (const path of [url, `${url}/_history/1`, `${url}?_summary=true`, `${url}?_pretty=true`]) {
            const reply = yield* call("GET", path, { headers: xml })
            expect(reply.status, path).toBe(200)
            expect(xmlNumbers(reply.text), path).toEqual(decimals)
          }
          const history = yield* call("GET", `${url}/_history`)
          expect(jsonNumbers(history.text).filter((n) => decimals.includes(n))).toEqual([...decimals, ...decimals])
          const typeHistory = yield* call("GET", `${base}/Observation/_history?_pretty=true`)
          expect(jsonNumbers(typeHistory.text).filter((n) => n === "105.00")).toHaveLength(2)
          expect(xmlNumbers((yield* call("GET", `${url}/_history`, { headers: xml })).text)).toEqual([...decimals, ...decimals])
          for (const query of [`_id=${id}`, `_id=${id}&_summary=true`, `_id=${id}&_elements=component`, `_id=${id}&_pretty=true`]) {
            const found = yield* call("GET", `${base}/Observation?${query}`)
            expect(found.status, query).toBe(200)
            expect(found.json.total ?? found.json.entry.length, query).toBe(1)
            expect(jsonNumbers(found.text).filter((n) => decimals.includes(n)), query).toEqual(query.includes("_elements") ? decimals.slice(1) : decimals)
            expect(xmlNumbers((yield* call("GET", `${base}/Observation?${query}`, { headers: xml })).text), query)
              .toEqual(query.includes("_elements") ? decimals.slice(1) : decimals)
          }
        }))

      it.effect("keep their text when the resource is sent in XML", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const body = `<Observation xmlns="http://hl7.org/fhir"><status value="final"/><code><text value="x"/></code>` +
            `<valueQuantity><value value="2.500"/></valueQuantity><component><code><text value="y"/></code>` +
            `<valueQuantity><value value="-83.694710"/></valueQuantity></component><component><code><text value="z"/></code>` +
            `<valueQuantity><value value="1e3"/></valueQuantity></component></Observation>`
          const created = yield* call("POST", `${base}/Observation`, { body, headers: { "content-type": "application/fhir+xml", ...xml } })
          expect(created.status).toBe(201)
          expect(xmlNumbers(created.text)).toEqual(["2.500", "-83.694710", "1e3"])
          const id = /<id value="([^"]+)"/.exec(created.text)![1]
          const read = yield* call("GET", `${base}/Observation/${id}`)
          expect(jsonNumbers(read.text)).toEqual(["2.500", "-83.694710", "1e3"])
          const again = yield* call("PUT", `${base}/Observation/${id}`, {
            body: (yield* call("GET", `${base}/Observation/${id}`, { headers: xml })).text,
            headers: { "content-type": "application/fhir+xml" }
          })
          expect(again.status).toBe(200)
          expect(jsonNumbers(again.text)).toEqual(["2.500", "-83.694710", "1e3"])
        }))

      it.effect("keep their text in transactions and batches, responses with Prefer: return=representation included", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          for (const type of ["transaction", "batch"]) {
            const bundle = `{"resourceType":"Bundle","type":"${type}","entry":[` +
              `{"fullUrl":"urn:uuid:8f0c4b9e-0d7a-4c43-9a53-2a4ef5f1c001","resource":${observationText()},"request":{"method":"POST","url":"Observation"}}]}`
            const reply = yield* call("POST", base, { body: bundle, headers: { prefer: "return=representation" } })
            expect(reply.status, type).toBe(200)
            expect(jsonNumbers(reply.text).filter((n) => decimals.includes(n)), type).toEqual(decimals)
            const location = reply.json.entry[0].response.location as string
            const read = yield* call("GET", `${base}/${location.split("/_history")[0]}`)
            expect(jsonNumbers(read.text), type).toEqual(decimals)
            const asXml = yield* call("POST", base, { body: bundle, headers: { prefer: "return=representation", ...xml } })
            expect(xmlNumbers(asXml.text), type).toEqual(decimals)
          }
        }))

      it.effect("keep their text through JSON Patch and FHIRPath Patch; a value set takes the patch's text", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: created } = yield* call("POST", `${base}/Observation`, { body: observationText() })
          const url = `${base}/Observation/${created.id}`
          const jsonPatch = (body: string) => call("PATCH", url, { body, headers: { "content-type": "application/json-patch+json" } })
          const statusPatched = yield* jsonPatch(`[{"op":"replace","path":"/status","value":"amended"}]`)
          expect(statusPatched.status).toBe(200)
          expect(jsonNumbers(statusPatched.text)).toEqual(decimals)
          expect(jsonNumbers((yield* call("GET", url)).text)).toEqual(decimals)
          const valuePatched = yield* jsonPatch(`[{"op":"replace","path":"/valueQuantity/value","value":7.10},` +
            `{"op":"remove","path":"/component/0"},{"op":"add","path":"/component/0","value":{"code":{"text":"f"},"valueQuantity":{"value":3.30}}},` +
            `{"op":"copy","from":"/component/1/valueQuantity/value","path":"/component/0/valueQuantity/value"}]`)
          expect(valuePatched.status, valuePatched.text).toBe(200)
          expect(jsonNumbers((yield* call("GET", url)).text)).toEqual(["7.10", "1.50E+3", ...decimals.slice(2)])
          const fhirPath = (operation: string) =>
            call("PATCH", url, { body: `{"resourceType":"Parameters","parameter":[{"name":"operation","part":[${operation}]}]}` })
          const codePatched = yield* fhirPath(`{"name":"type","valueCode":"replace"},{"name":"path","valueString":"Observation.code.text"},{"name":"value","valueString":"renamed"}`)
          expect(codePatched.status, codePatched.text).toBe(200)
          expect(jsonNumbers(codePatched.text)).toEqual(["7.10", "1.50E+3", ...decimals.slice(2)])
          const decimalPatched = yield* fhirPath(`{"name":"type","valueCode":"replace"},{"name":"path","valueString":"Observation.valueQuantity.value"},{"name":"value","valueDecimal":8.200}`)
          expect(decimalPatched.status, decimalPatched.text).toBe(200)
          const moved = yield* fhirPath(`{"name":"type","valueCode":"move"},{"name":"path","valueString":"Observation.component"},{"name":"source","valueInteger":0},{"name":"destination","valueInteger":2}`)
          expect(moved.status, moved.text).toBe(200)
          const read = yield* call("GET", url)
          expect(read.json.code.text).toBe("renamed")
          expect(jsonNumbers(read.text)).toEqual(["8.200", ...decimals.slice(2, 4), "1.50E+3", ...decimals.slice(4)])
          expect(xmlNumbers((yield* call("GET", url, { headers: xml })).text)).toEqual(["8.200", ...decimals.slice(2, 4), "1.50E+3", ...decimals.slice(4)])
        }))

      it.effect("number search: the searched value's precision sets the range of eq and ne; the index keeps the resource's precision", () =>
        Effect.gen(function*() {
          const { base, searchIndexed } = yield* Server
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const risk = (probability: string) =>
            `{"resourceType":"RiskAssessment","status":"final","subject":{"reference":"Patient/${patient.id}"},"prediction":[{"probabilityDecimal":${probability}}]}`
          const labels = ["0.3", "0.30", "0.300", "0.31"]
          const ids: Array<string> = []
          for (const probability of labels) ids.push((yield* call("POST", `${base}/RiskAssessment`, { body: risk(probability) })).json.id)
          yield* searchIndexed
          const find = (query: string) =>
            Effect.map(call("GET", `${base}/RiskAssessment?subject=Patient/${patient.id}&${query}&_count=100`), (reply) => {
              expect(reply.status, query).toBe(200)
              const found = new Set((reply.json.entry ?? []).map((entry: any) => entry.resource.id))
              return labels.filter((_, i) => found.has(ids[i]))
            })
          expect(yield* find("probability=0.3")).toEqual(["0.3", "0.30", "0.300", "0.31"])
          expect(yield* find("probability=0.30")).toEqual(["0.3", "0.30", "0.300"])
          expect(yield* find("probability=0.300")).toEqual(["0.3", "0.30", "0.300"])
          expect(yield* find("probability=3.0e-1")).toEqual(["0.3", "0.30", "0.300"])
          expect(yield* find("probability=ne0.30")).toEqual(["0.31"])
          expect(yield* find("probability=0.31")).toEqual(["0.31"])
          // _filter's `co`: the resource value's own range, from the digits it was written with.
          expect(yield* find(`_filter=${encodeURIComponent("probability co 0.304")}`)).toEqual(["0.3", "0.30"])
          expect(yield* find(`_filter=${encodeURIComponent("probability co 0.34")}`)).toEqual(["0.3"])
        }))
    })
  })
}
