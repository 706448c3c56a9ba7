/**
 * `$expand` and `$expandability` over HTTP on SQLite and Postgres with the real R4 packages: the R4
 * example request, value sets of the packages by url and by id, one given inline, a CodeSystem of 12,000
 * codes and its ValueSet written over REST (taking effect once the catalog is rebuilt) paged and filtered,
 * nesting, XML, the refusals (not-present code systems, too costly, unknown), access under scopes, and
 * search through the same terminology (`:in`, `:below`, uri `:below`).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { anonymous, type Authorized } from "../../src/http/Principal.ts"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { operationsOn } from "../../src/operations/registry.ts"
import { maxExpansionCodes } from "../../src/terminology/expansion.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ExpandServer")<Server, TestServer>() {}

const actCode = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
const encounterCodes = "http://terminology.hl7.org/ValueSet/v3-ActEncounterCode"

const caller = (scopes: string): Authorized => ({ _tag: "Authorized", address: "127.0.0.1", clientId: "expand-test", user: "someone", scopes: scopes.split(" "), patient: undefined })

/** Callers by the name a test header carries; without it a request is anonymous (a server without --smart). */
const callers = {
  reader: caller("system/ValueSet.rs"),
  observations: caller("system/Observation.rs"),
  drafts: caller("system/ValueSet.rs?status=draft")
} as const

const header = "x-test-caller"

const resolution = Layer.succeed(PrincipalResolution, (headers, address) => {
  const name = headers[header]
  return typeof name === "string" && name in callers ? callers[name as keyof typeof callers] : anonymous(address)
})

const request = (method: string, path: string, options: { readonly body?: unknown; readonly as?: keyof typeof callers; readonly headers?: Record<string, string> } = {}) =>
  Effect.flatMap(Server, ({ base }) =>
    call(method, `${base}/${path}`, {
      ...(options.body === undefined ? {} : { body: options.body }),
      headers: { ...options.headers, ...(options.as === undefined ? {} : { [header]: options.as }) }
    }))

const get = (path: string, as?: keyof typeof callers) => request("GET", path, as === undefined ? {} : { as })

const ok = (reply: Reply): any => {
  expect([reply.status, reply.status === 200 ? "" : reply.text.slice(0, 600)]).toEqual([200, ""])
  return reply.json
}

const codesOf = (valueSet: any): Array<string> => (valueSet.expansion.contains ?? []).map((item: any) => item.code)

const parameter = (parameters: any, name: string): any => parameters.parameter.find((p: any) => p.name === name)

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

/**
 * CodeSystems of `count` codes in all, `F0`, `F1`, ... displayed "Finding <n> of group <alpha|beta|gamma|delta>",
 * written over REST in parts of at most 40,000 codes (a resource has at most 50,000 search index values), and a
 * ValueSet of all of them; its url and id.
 */
const bigTerminology = (name: string, count: number) =>
  Effect.gen(function*() {
    const valueSet = `http://example.org/fhir/ValueSet/${name}`
    const groups = ["alpha", "beta", "gamma", "delta"]
    const part = 40_000
    const systems: Array<string> = []
    for (let start = 0; start < count; start += part) {
      const system = `http://example.org/fhir/CodeSystem/${name}-${systems.length}`
      const concept = Array.from({ length: Math.min(part, count - start) }, (_, i) => ({ code: `F${start + i}`, display: `Finding ${start + i} of group ${groups[(start + i) % 4]}` }))
      const written = yield* request("POST", "CodeSystem", { body: { resourceType: "CodeSystem", url: system, status: "active", content: "complete", concept } })
      expect([written.status, written.text.slice(0, 300)]).toEqual([201, written.text.slice(0, 300)])
      systems.push(system)
    }
    const set = yield* request("POST", "ValueSet", {
      body: { resourceType: "ValueSet", url: valueSet, name: "Big", status: "active", compose: { include: systems.map((system) => ({ system })) } }
    })
    expect(set.status).toBe(201)
    return { valueSet, id: set.json.id as string }
  })

it("the CapabilityStatement lists $expand and $expandability on ValueSet, each with its definition", () => {
  expect(operationsOn("ValueSet")).toEqual(expect.arrayContaining([
    { name: "expand", definition: "http://hl7.org/fhir/OperationDefinition/ValueSet-expand" },
    { name: "expandability", definition: "urn:svc:OperationDefinition:ValueSet-expandability" }
  ]))
  expect(operationsOn("CodeSystem").map((operation) => operation.name)).not.toContain("expand")
})

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`$expand on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } }).pipe(Effect.provide(resolution))),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("the R4 example (a SNOMED CT value set with filter=abdo) is refused: SNOMED CT is held without its codes", () =>
        Effect.gen(function*() {
          const reply = yield* get("ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/body-site&filter=abdo")
          expect(reply.status).toBe(422)
          expect(reply.json.resourceType).toBe("OperationOutcome")
          expect(reply.json.issue[0]).toMatchObject({ severity: "error", code: "not-supported" })
          expect(reply.json.issue[0].diagnostics).toContain("http://snomed.info/sct, which this server holds without its content (content 'not-present')")
          const loinc = yield* get("ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/observation-codes")
          expect(loinc.status).toBe(422)
          expect(loinc.json.issue[0]).toMatchObject({ code: "not-found", diagnostics: expect.stringContaining("needs the code system http://loinc.org, which this server does not hold") })
        }))

      it.effect("a value set of the packages by url with a text filter: the matching codes, the filter echoed", () =>
        Effect.gen(function*() {
          const answer = ok(yield* get(`ValueSet/$expand?url=${encounterCodes}&filter=inpatient`))
          expect(answer).toMatchObject({ resourceType: "ValueSet", url: encounterCodes, status: "active" })
          expect(answer.compose).toBeUndefined()
          expect(codesOf(answer)).toEqual(["IMP", "ACUTE", "NONAC"])
          expect(answer.expansion.contains[0]).toMatchObject({ system: actCode, code: "IMP", display: "inpatient encounter", version: expect.any(String) })
          expect(answer.expansion).toMatchObject({ identifier: expect.stringMatching(/^urn:uuid:[0-9a-f-]{36}$/), total: 3 })
          expect(Date.parse(answer.expansion.timestamp)).not.toBeNaN()
          expect(answer.expansion.parameter).toEqual(expect.arrayContaining([{ name: "url", valueUri: encounterCodes }, { name: "filter", valueString: "inpatient" }]))
          expect(answer.expansion.parameter.find((p: any) => p.name === "used-codesystem").valueUri).toMatch(new RegExp(`^${actCode}\\|`))
        }))

      it.effect("a stored value set by id, POST with parameters in a body, and a value set given inline", () =>
        Effect.gen(function*() {
          const found = ok(yield* get(`ValueSet?url=${encounterCodes}`))
          const id = found.entry[0].resource.id
          const byId = ok(yield* get(`ValueSet/${id}/$expand?filter=amb`))
          expect([byId.id, codesOf(byId)]).toEqual([id, ["AMB"]])
          const posted = ok(yield* request("POST", "ValueSet/$expand", {
            body: { resourceType: "Parameters", parameter: [{ name: "url", valueUri: encounterCodes }, { name: "count", valueInteger: 2 }, { name: "activeOnly", valueBoolean: true }] }
          }))
          expect([posted.expansion.total, codesOf(posted)]).toEqual([11, ["AMB", "EMER"]])
          const given = ok(yield* request("POST", "ValueSet/$expand", {
            body: {
              resourceType: "Parameters",
              parameter: [
                { name: "valueSet", resource: { resourceType: "ValueSet", status: "draft", compose: { include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "IMMUNIZ" }] }] } } },
                { name: "includeDefinition", valueBoolean: true }
              ]
            }
          }))
          expect(given.expansion.contains).toEqual([
            expect.objectContaining({ code: "IMMUNIZ" }),
            expect.objectContaining({ code: "BOOSTER", inactive: true }),
            expect.objectContaining({ code: "INITIMMUNIZ", inactive: true })
          ])
          expect(given.compose.include[0].system).toBe(actCode)
          const active = ok(yield* request("POST", "ValueSet/$expand?activeOnly=true", {
            body: { resourceType: "Parameters", parameter: [{ name: "valueSet", resource: { resourceType: "ValueSet", status: "draft", compose: { include: [{ system: actCode, filter: [{ property: "concept", op: "is-a", value: "IMMUNIZ" }] }] } } }] }
          }))
          expect(codesOf(active)).toEqual(["IMMUNIZ"])
        }))

      it.effect("a CodeSystem of 12,000 codes and its ValueSet written over REST: expanded once the catalog has them, paged and filtered", () =>
        Effect.gen(function*() {
          const { searchIndexed } = yield* Server
          const big = yield* bigTerminology(`big-${backend.kind}`, 12_000)
          // At instance level the stored ValueSet is read from the database: it is there before the catalog is rebuilt.
          yield* searchIndexed
          const page = ok(yield* get(`ValueSet/$expand?url=${big.valueSet}&count=5&offset=100`))
          expect(page.expansion).toMatchObject({ total: 12_000, offset: 100 })
          expect(codesOf(page)).toEqual(["F100", "F101", "F102", "F103", "F104"])
          expect(page.expansion.parameter).toEqual(expect.arrayContaining([{ name: "count", valueInteger: 5 }, { name: "offset", valueInteger: 100 }]))
          const filtered = ok(yield* get(`ValueSet/$expand?url=${big.valueSet}&filter=finding%20117&count=3`))
          // "Finding 117", "Finding 1170".."1179", "Finding 11700".."11799": 1 + 10 + 100 codes.
          expect(filtered.expansion.total).toBe(111)
          expect(codesOf(filtered)).toEqual(["F117", "F1170", "F1171"])
          const gamma = ok(yield* get(`ValueSet/${big.id}/$expand?filter=GAMMA%2011&count=100`))
          // 11, 110-119, 1100-1199 and 11000-11999 of group gamma (n % 4 = 2): 3 + 25 + 250 codes, the first 100 shown.
          expect([gamma.expansion.total, gamma.expansion.contains.length]).toEqual([278, 100])
          expect(codesOf(gamma).every((code: string) => Number(code.slice(1)) % 4 === 2 && code.startsWith("F11"))).toBe(true)
          // Search keeps its own limit of 10,000 codes for :in.
          const search = yield* get(`Observation?code:in=${big.valueSet}`)
          expect(search.status).toBe(400)
          expect(search.json.issue[0].diagnostics).toContain("has more than 10000 codes")
          const expandability = ok(yield* get(`ValueSet/$expandability?url=${big.valueSet}`))
          expect(parameter(expandability, "expandable").valueBoolean).toBe(true)
          expect(parameter(expandability, "count").valueInteger).toBe(12_000)
        }))

      it.effect("a value set importing another, nested along the hierarchy when excludeNested=false, and XML", () =>
        Effect.gen(function*() {
          const { searchIndexed } = yield* Server
          const url = `http://example.org/fhir/ValueSet/imports-${backend.kind}`
          const written = yield* request("POST", "ValueSet", {
            body: { resourceType: "ValueSet", url, status: "active", compose: { include: [{ valueSet: [encounterCodes] }], exclude: [{ system: actCode, concept: [{ code: "VR" }] }] } }
          })
          expect(written.status).toBe(201)
          // By id it is read from the database: expanded at once, before the catalog is rebuilt with it.
          expect(codesOf(ok(yield* get(`ValueSet/${written.json.id}/$expand`))).sort()).toEqual(["ACUTE", "AMB", "EMER", "FLD", "HH", "IMP", "NONAC", "OBSENC", "PRENC", "SS"])
          yield* searchIndexed
          const flat = ok(yield* get(`ValueSet/$expand?url=${url}`))
          // In the code system's order, which the installed packages decide.
          expect(codesOf(flat).sort()).toEqual(["ACUTE", "AMB", "EMER", "FLD", "HH", "IMP", "NONAC", "OBSENC", "PRENC", "SS"])
          const nested = ok(yield* get(`ValueSet/$expand?url=${url}&excludeNested=false`))
          expect(codesOf(nested).sort()).toEqual(["AMB", "EMER", "FLD", "HH", "IMP", "OBSENC", "PRENC", "SS"])
          const inpatient = nested.expansion.contains.find((item: any) => item.code === "IMP")
          expect(inpatient.contains.map((item: any) => item.code).sort()).toEqual(["ACUTE", "NONAC"])
          expect(nested.expansion.total).toBe(10)
          const xml = yield* get(`ValueSet/$expand?url=${url}&count=2&_format=xml`)
          expect(xml.status).toBe(200)
          expect(xml.headers.get("content-type")).toContain("application/fhir+xml")
          expect(xml.text).toContain('<ValueSet xmlns="http://hl7.org/fhir">')
          expect(xml.text).toMatch(/<expansion>.*<total value="10"\/>.*<offset value="0"\/>.*<contains>.*<code value="[A-Z]+"\/>.*<\/expansion>/s)
        }))

      it.effect("more codes than the limit is a 413 too-costly naming the value set and the limit; a filter that narrows it works", () =>
        Effect.gen(function*() {
          const { searchIndexed } = yield* Server
          const huge = yield* bigTerminology(`huge-${backend.kind}`, maxExpansionCodes + 1)
          yield* searchIndexed
          const refused = yield* get(`ValueSet/$expand?url=${huge.valueSet}&count=10`)
          expect(refused.status).toBe(413)
          expect(refused.json.issue[0]).toMatchObject({ code: "too-costly" })
          expect(refused.json.issue[0].diagnostics).toContain(`the ValueSet ${huge.valueSet} has more than ${maxExpansionCodes} codes`)
          const narrowed = ok(yield* get(`ValueSet/$expand?url=${huge.valueSet}&filter=finding%20100000`))
          expect(codesOf(narrowed)).toEqual(["F100000"])
          const expandability = ok(yield* get(`ValueSet/${huge.id}/$expandability`))
          expect(parameter(expandability, "expandable").valueBoolean).toBe(false)
          expect(parameter(expandability, "countAtLeast").valueInteger).toBe(maxExpansionCodes + 1)
          expect(parameter(expandability, "reason").part).toEqual(expect.arrayContaining([{ name: "kind", valueCode: "too-costly" }]))
        }), 300_000)

      it.effect("$expandability says why a value set cannot be expanded, or how many codes it has", () =>
        Effect.gen(function*() {
          const held = ok(yield* get(`ValueSet/$expandability?url=${encounterCodes}`))
          expect(held.resourceType).toBe("Parameters")
          expect([parameter(held, "expandable").valueBoolean, parameter(held, "count").valueInteger, parameter(held, "limit").valueInteger]).toEqual([true, 11, maxExpansionCodes])
          expect(parameter(held, "codeSystem").part).toEqual(expect.arrayContaining([{ name: "system", valueUri: actCode }, { name: "content", valueCode: "complete" }]))
          const snomed = ok(yield* get("ValueSet/$expandability?url=http://hl7.org/fhir/ValueSet/body-site"))
          expect(parameter(snomed, "expandable").valueBoolean).toBe(false)
          expect(parameter(snomed, "reason").part).toEqual([
            { name: "kind", valueCode: "no-content" },
            { name: "subject", valueUri: "http://snomed.info/sct" },
            { name: "message", valueString: expect.stringContaining("content 'not-present'") }
          ])
          const unknown = ok(yield* get("ValueSet/$expandability?url=http://example.org/none"))
          expect(parameter(unknown, "expandable").valueBoolean).toBe(false)
          expect(parameter(unknown, "reason").part[0]).toEqual({ name: "kind", valueCode: "unknown-value-set" })
          const several = ok(yield* request("POST", "ValueSet/$expandability", {
            body: {
              resourceType: "Parameters",
              parameter: [{
                name: "valueSet",
                resource: {
                  resourceType: "ValueSet",
                  status: "draft",
                  compose: {
                    include: [
                      { system: "http://loinc.org", filter: [{ property: "COMPONENT", op: "=", value: "x" }] },
                      { valueSet: ["http://example.org/missing"] },
                      { system: actCode, filter: [{ property: "code", op: "regex", value: "(A+)+" }] }
                    ]
                  }
                }
              }]
            }
          }))
          expect(several.parameter.filter((p: any) => p.name === "reason").map((p: any) => p.part[0].valueCode)).toEqual(["unknown-code-system", "unknown-value-set", "invalid-filter"])
        }))

      it.effect("refusals: unknown value set 404, unknown or malformed parameters 400, date and context not supported", () =>
        Effect.gen(function*() {
          const unknown = yield* get("ValueSet/$expand?url=http://example.org/none")
          expect([unknown.status, unknown.json.issue[0].diagnostics]).toEqual([404, "the ValueSet http://example.org/none is not known to this server"])
          expect((yield* get("ValueSet/no-such-id/$expand")).status).toBe(404)
          expect((yield* get("ValueSet/$expand")).status).toBe(400)
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&count=-1`)).status).toBe(400)
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&count=many`)).status).toBe(400)
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&colour=red`)).status).toBe(400)
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&date=2020-01-01`)).json.issue[0].diagnostics).toContain("does not take 'date'")
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&system-version=${actCode}`)).status).toBe(400)
          const forced = yield* get(`ValueSet/$expand?url=${encounterCodes}&force-system-version=${actCode}|0.1`)
          expect([forced.status, forced.json.issue[0].diagnostics]).toEqual([422, expect.stringContaining(`version 0.1 of ${actCode} was asked for`)])
          expect((yield* get(`Patient/$expand?url=${encounterCodes}`)).status).toBe(404)
          const system = yield* get(`$expand?url=${encounterCodes}`)
          expect([system.status, system.json.issue[0].diagnostics]).toEqual([404, expect.stringContaining("$expand is defined on ValueSet")])
        }))

      it.effect("access: read on ValueSet is needed; a restricted grant sees only the value sets it allows; inline needs read only", () =>
        Effect.gen(function*() {
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}&count=1`, "reader")).status).toBe(200)
          const refused = yield* get(`ValueSet/$expand?url=${encounterCodes}`, "observations")
          expect([refused.status, refused.json.issue[0].code]).toEqual([403, "forbidden"])
          expect((yield* get(`ValueSet/$expandability?url=${encounterCodes}`, "observations")).status).toBe(403)
          // The packages' value set is active: a grant of draft ones does not see it, by url or by id.
          expect((yield* get(`ValueSet/$expand?url=${encounterCodes}`, "drafts")).status).toBe(404)
          const id = ok(yield* get(`ValueSet?url=${encounterCodes}`)).entry[0].resource.id
          expect((yield* get(`ValueSet/${id}/$expand`, "drafts")).status).toBe(404)
          const draft = yield* request("POST", "ValueSet", {
            body: { resourceType: "ValueSet", url: `http://example.org/fhir/ValueSet/draft-${backend.kind}`, status: "draft", compose: { include: [{ valueSet: [encounterCodes] }] } }
          })
          expect((yield* get(`ValueSet/${draft.json.id}/$expand?count=1`, "drafts")).status).toBe(200)
          const inline = yield* request("POST", "ValueSet/$expand", {
            as: "drafts",
            body: { resourceType: "Parameters", parameter: [{ name: "valueSet", resource: { resourceType: "ValueSet", status: "active", compose: { include: [{ system: actCode, concept: [{ code: "AMB" }] }] } } }] }
          })
          expect(codesOf(ok(inline))).toEqual(["AMB"])
        }))

      it.effect("search through the same terminology: token :in and :below on real codes, uri :below and :above", () =>
        Effect.gen(function*() {
          const { searchIndexed } = yield* Server
          const patient = (yield* request("POST", "Patient", { body: { resourceType: "Patient", name: [{ family: `Terminology${backend.kind}` }] } })).json
          const classes = ["AMB", "ACUTE", "IMP", "NONAC", "FFS"]
          const ids: Array<string> = []
          for (const code of classes) {
            const written = yield* request("POST", "Encounter", {
              body: { resourceType: "Encounter", status: "finished", class: { system: actCode, code }, subject: { reference: `Patient/${patient.id}` } }
            })
            expect(written.status).toBe(201)
            ids.push(written.json.id)
          }
          yield* searchIndexed
          const found = (query: string) =>
            Effect.map(get(`Encounter?subject=Patient/${patient.id}&${query}&_count=100`), (reply) =>
              classes.filter((_, i) => ok(reply).entry?.some((e: any) => e.resource.id === ids[i])))
          expect(yield* found(`class:in=${encounterCodes}`)).toEqual(["AMB", "ACUTE", "IMP", "NONAC"])
          expect(yield* found(`class:not-in=${encounterCodes}`)).toEqual(["FFS"])
          expect(yield* found(`class:below=${actCode}|IMP`)).toEqual(["ACUTE", "IMP", "NONAC"])
          expect(yield* found(`class:above=${actCode}|ACUTE`)).toEqual(["ACUTE", "IMP"])
          const snomed = yield* get(`Encounter?class:in=http://hl7.org/fhir/ValueSet/body-site`)
          expect(snomed.status).toBe(400)
          const root = `http://example.org/fhir/uri-${backend.kind}`
          for (const url of [`${root}/ValueSet/a`, `${root}/ValueSet/a/b`, `${root}-other/ValueSet/c`]) {
            expect((yield* request("POST", "ValueSet", { body: { resourceType: "ValueSet", url, status: "draft" } })).status).toBe(201)
          }
          yield* searchIndexed
          const urls = (query: string) => Effect.map(get(`ValueSet?${query}`), (reply) => (ok(reply).entry ?? []).map((e: any) => e.resource.url).sort())
          expect(yield* urls(`url:below=${root}/ValueSet`)).toEqual([`${root}/ValueSet/a`, `${root}/ValueSet/a/b`])
          expect(yield* urls(`url:above=${root}/ValueSet/a/b/c`)).toEqual([`${root}/ValueSet/a`, `${root}/ValueSet/a/b`])
        }))
    })
  })
}
