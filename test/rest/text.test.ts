/**
 * Text FHIR cannot hold (control characters other than TAB, CR and LF, U+FFFE, U+FFFF, unpaired surrogates)
 * and bodies nested too deep are refused with a 400 on every way in, on SQLite and Postgres; nothing of them
 * is stored, and every search keeps working after.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/Server")<Server, TestServer>() {}

const xmlType = { "content-type": "application/fhir+xml" }
const jsonPatchType = { "content-type": "application/json-patch+json" }
const family = (text: string) => `{"resourceType":"Patient","name":[{"family":"${text}"}]}`
const bundle = (type: string, entries: string) => `{"resourceType":"Bundle","type":"${type}","entry":[${entries}]}`
const deepJson = (levels: number) => "[".repeat(levels) + "\"x\"" + "]".repeat(levels)

/** The first issue of an OperationOutcome answer. */
const issue = (reply: { readonly json: any }): { code: string; diagnostics: string; expression?: Array<string> } => reply.json?.issue?.[0]

const backendsUnderTest = [
  { kind: "sqlite" as const, skip: false },
  { kind: "postgres" as const, skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`text FHIR cannot hold, and nesting, on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("refuses a body holding NUL, another control character, U+FFFF or an unpaired surrogate with a 400 naming the element", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Keep" }] } })
          expect(created.status).toBe(201)
          const id = created.json.id as string
          const refused = (reply: { readonly status: number; readonly json: any }, expression?: string) => {
            expect(reply.status).toBe(400)
            expect(issue(reply).code).toMatch(/^(invalid|structure)$/)
            if (expression !== undefined) expect(issue(reply).expression).toEqual([expression])
          }
          const nul = yield* call("POST", `${base}/Patient`, { body: family("a\\u0000b") })
          refused(nul, "Patient.name[0].family")
          expect(issue(nul).diagnostics).toContain("U+0000")
          refused(yield* call("POST", `${base}/Patient`, { body: family("a\\u0001b") }), "Patient.name[0].family")
          refused(yield* call("POST", `${base}/Patient`, { body: family("a\\uffffb") }), "Patient.name[0].family")
          refused(yield* call("POST", `${base}/Patient`, { body: family("a\\ud800b") }), "Patient.name[0].family")
          refused(yield* call("POST", `${base}/Patient`, { body: family("a\\udc00") }), "Patient.name[0].family")
          // In a property name, in a contained resource, in an update and a conditional update.
          const name = yield* call("POST", `${base}/Patient`, { body: `{"resourceType":"Patient","na\\u0000me":[]}` })
          refused(name)
          expect(issue(name).diagnostics).toContain("property name")
          refused(
            yield* call("POST", `${base}/Patient`, { body: `{"resourceType":"Patient","contained":[{"resourceType":"Organization","id":"o","name":"\\u0000"}]}` }),
            "Patient.contained[0].name"
          )
          refused(yield* call("PUT", `${base}/Patient/${id}`, { body: `{"resourceType":"Patient","id":"${id}","gender":"\\u0000male"}` }), "Patient.gender")
          refused(yield* call("PUT", `${base}/Patient?_id=${id}`, { body: `{"resourceType":"Patient","id":"${id}","gender":"\\u0000male"}` }))
          refused(yield* call("POST", `${base}/Patient`, { body: family("x"), headers: { "if-none-exist": "family=%00" } }))
          // XML: a character reference or the raw character.
          refused(yield* call("POST", `${base}/Patient`, { body: `<Patient xmlns="http://hl7.org/fhir"><name><family value="a&#0;b"/></name></Patient>`, headers: xmlType }))
          refused(yield* call("POST", `${base}/Patient`, { body: `<Patient xmlns="http://hl7.org/fhir"><name><family value="a\u0001b"/></name></Patient>`, headers: xmlType }))
          refused(yield* call("POST", `${base}/Patient`, { body: `<Patient xmlns="http://hl7.org/fhir"><name><family value="a&#xFFFF;b"/></name></Patient>`, headers: xmlType }))
          // Bundles: the whole Bundle is refused, wherever the entry is.
          const entry = `{"fullUrl":"urn:uuid:0c3e2c44-0001-4000-8000-000000000001","resource":${family("a\\u0000b")},"request":{"method":"POST","url":"Patient"}}`
          refused(yield* call("POST", base, { body: bundle("transaction", entry) }), "Bundle.entry[0].resource.name[0].family")
          refused(yield* call("POST", base, { body: bundle("batch", entry) }), "Bundle.entry[0].resource.name[0].family")
          // Patches: JSON Patch, FHIRPath Patch, and a JSON Patch in a Bundle's Binary.
          refused(yield* call("PATCH", `${base}/Patient/${id}`, { body: `[{"op":"add","path":"/gender","value":"\\u0000"}]`, headers: jsonPatchType }), "[0].value")
          refused(yield* call("PATCH", `${base}/Patient/${id}`, {
            body: `{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"add"},{"name":"path","valueString":"Patient"},{"name":"name","valueString":"gender"},{"name":"value","valueCode":"\\u0000"}]}]}`
          }), "Parameters.parameter[0].part[3].valueCode")
          const patchData = Buffer.from(`[{"op":"add","path":"/gender","value":"\\u0000"}]`).toString("base64")
          const inBinary = yield* call("POST", base, {
            body: bundle("batch", `{"resource":{"resourceType":"Binary","contentType":"application/json-patch+json","data":"${patchData}"},"request":{"method":"PATCH","url":"Patient/${id}"}}`)
          })
          expect(inBinary.status).toBe(200)
          expect(inBinary.json.entry[0].response.status).toMatch(/^400/)
          // TAB, CR and LF are text.
          const kept = yield* call("POST", `${base}/Patient`, { body: family("tab\\there\\r\\nnext") })
          expect(kept.status).toBe(201)
          expect(kept.json.name[0].family).toBe("tab\there\r\nnext")

          // Nothing was stored from any of these, and every search still answers.
          const history = yield* call("GET", `${base}/Patient/_history?_count=1000`)
          expect(history.status).toBe(200)
          expect(history.json.total ?? history.json.entry.length).toBe(2)
          expect(history.text).not.toMatch(/\\u0000|\\u0001|\\uffff|\\ud800|\\udc00/i)
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.gender).toBeUndefined()
          for (const query of ["_text=Keep", "_content=Keep", "family=Keep", "name=Keep", "_id=" + id, "_lastUpdated=gt2000-01-01"]) {
            const found = yield* call("GET", `${base}/Patient?${query}`)
            expect([query, found.status]).toEqual([query, 200])
          }
          expect((yield* call("GET", `${base}/Patient?family=Keep`)).json.entry).toHaveLength(1)
        }))

      it.effect("refuses NUL and percent-encoding that is not UTF-8 in paths, query parameters, conditions and Bundle URLs with a 400", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Query" }] } })
          const id = created.json.id as string
          const refused = (reply: { readonly status: number; readonly json: any }, what: string) => {
            expect([what, reply.status, issue(reply)?.code]).toEqual([what, 400, "invalid"])
          }
          for (const path of ["Patient/%00", "Patient/%ED%A0%80", "Patient/%FF", `Patient/${id}/_history/%00`, "Patient?family=%00", "Patient?fam%00ily=x",
            "Patient?family=%ED%A0%80", "Patient?family=%EF%BF%BF", "Patient?_filter=family%20eq%20%00", "Patient?_cursor=%00", "Patient/_history?_since=%00",
            "_history?_at=%ED%A0%80", `Patient/${id}/_history?_count=%00`, "?_type=Patient&_text=%00", "Patient?_format=json&family=%01"]) {
            refused(yield* call("GET", `${base}/${path}`), path)
          }
          for (const ifNoneExist of ["family=%00", "family=%ED%A0%80"]) {
            refused(yield* call("POST", `${base}/Patient`, { body: family("x"), headers: { "if-none-exist": ifNoneExist } }), ifNoneExist)
          }
          refused(yield* call("DELETE", `${base}/Patient?family=%00`), "conditional delete")
          refused(yield* call("PATCH", `${base}/Patient?family=%00`, { body: `[]`, headers: jsonPatchType }), "conditional patch")
          refused(yield* call("POST", `${base}/Patient/_search`, { body: "family=%00", headers: { "content-type": "application/x-www-form-urlencoded" } }), "posted search")
          // A Bundle entry's URL that cannot be read makes the Bundle malformed, a batch too.
          for (const url of ["Patient?family=%00", "Patient/%00", "Patient?family=%ED%A0%80", "Patient/_history?_since=%00", "Patient?fam%00ily=x"]) {
            const batch = yield* call("POST", base, { body: bundle("batch", `{"request":{"method":"GET","url":"${url}"}}`) })
            refused(batch, url)
            expect(issue(batch).diagnostics).toContain("Bundle.entry[0]")
          }
          expect((yield* call("POST", base, { body: bundle("transaction", `{"request":{"method":"DELETE","url":"Patient?family=%00"}}`) })).status).toBe(400)
          const condition = `{"resource":${family("x")},"request":{"method":"POST","url":"Patient","ifNoneExist":"family=%00"}}`
          expect((yield* call("POST", base, { body: bundle("transaction", condition) })).status).toBe(400)
          // Searches still answer.
          expect((yield* call("GET", `${base}/Patient?family=Query`)).json.entry).toHaveLength(1)
          expect((yield* call("GET", `${base}/Patient?_text=Query`)).status).toBe(200)
          expect((yield* call("GET", `${base}/Patient/${id}`)).status).toBe(200)
        }))

      it.effect("refuses a body nested deeper than 256 levels with a 400 naming the limit, and takes one within it", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const id = created.json.id as string
          const tooDeep = (reply: { readonly status: number; readonly json: any }, what: string) => {
            expect([what, reply.status, issue(reply)?.code]).toEqual([what, 400, "structure"])
            expect(issue(reply).diagnostics).toContain("256")
          }
          const deep = deepJson(10_000)
          tooDeep(yield* call("POST", `${base}/Basic`, { body: `{"resourceType":"Basic","code":{"text":"x"},"extension":${deep}}` }), "create")
          tooDeep(yield* call("POST", base, {
            body: bundle("transaction", `{"resource":{"resourceType":"Basic","code":{"text":"x"},"extension":${deep}},"request":{"method":"POST","url":"Basic"}}`)
          }), "transaction")
          tooDeep(yield* call("PATCH", `${base}/Patient/${id}`, { body: `[{"op":"add","path":"/extension","value":${deep}}]`, headers: jsonPatchType }), "JSON Patch")
          tooDeep(yield* call("PATCH", `${base}/Patient/${id}`, { body: `{"resourceType":"Parameters","parameter":${deep}}` }), "FHIRPath Patch")
          tooDeep(yield* call("POST", `${base}/Patient`, { body: `<Patient xmlns="http://hl7.org/fhir">${"<x>".repeat(300)}${"</x>".repeat(300)}</Patient>`, headers: xmlType }), "XML")
          // A FHIRPath Patch path too large to evaluate safely.
          const path = "Patient" + ".where(true".repeat(2000) + ")".repeat(2000)
          const bigPath = yield* call("PATCH", `${base}/Patient/${id}`, {
            body: { resourceType: "Parameters", parameter: [{ name: "operation", part: [{ name: "type", valueCode: "delete" }, { name: "path", valueString: path }] }] }
          })
          expect(bigPath.status).toBe(400)
          expect(issue(bigPath).diagnostics).toContain("the limit is 256")
          // 45 nested extensions (92 levels of objects and arrays; validation takes 100 levels of objects): taken.
          let extension: Record<string, unknown> = { url: "http://example.org/leaf", valueString: "leaf" }
          for (let i = 0; i < 44; i++) extension = { url: `http://example.org/level${i}`, extension: [extension] }
          const nested = yield* call("PUT", `${base}/Patient/${id}`, { body: { resourceType: "Patient", id, extension: [extension] } })
          expect(nested.status).toBe(200)
          expect((yield* call("GET", `${base}/Patient/${id}`, { headers: { accept: "application/fhir+xml" } })).status).toBe(200)
        }))

      it.effect("keeps CR, TAB and LF in narrative and strings through XML GET, XML PUT and JSON GET", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const div = `<div xmlns="http://www.w3.org/1999/xhtml">\r\n<p title="a\rb\tc">one\r\ntwo\rthree</p>\r\n</div>`
          const created = yield* call("POST", `${base}/Patient`, {
            body: { resourceType: "Patient", text: { status: "generated", div }, name: [{ family: "cr\rtab\tlf\ncrlf\r\nend", given: ["\t"] }] }
          })
          expect(created.status).toBe(201)
          const url = `${base}/Patient/${created.json.id}`
          const xml = yield* call("GET", url, { headers: { accept: "application/fhir+xml" } })
          expect(xml.status).toBe(200)
          expect(xml.text).not.toContain("\r")
          const put = yield* call("PUT", url, { body: xml.text, headers: xmlType })
          expect(put.status).toBe(200)
          const read = yield* call("GET", url)
          expect(read.json.meta.versionId).toBe("2")
          const { meta: _first, ...before } = created.json
          const { meta: _second, ...after } = read.json
          expect(after).toEqual(before)
          expect(after.text.div).toBe(div)
        }))
    })
  })
}
