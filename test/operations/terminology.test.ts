/**
 * The terminology operations over HTTP on SQLite and Postgres with the real R4 packages: `$lookup`,
 * `$validate-code` (ValueSet and CodeSystem), `$subsumes` and `$translate` at type and instance level, GET
 * and POST, the honest answers for code systems the server does not hold (LOINC, not held at all; SNOMED CT,
 * held without its content), a ConceptMap written over REST, one answer in XML, the refusals, and what a
 * caller's scopes allow (callers named by a test header, as a front door names them from tokens).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import type { Authorized } from "../../src/http/Principal.ts"
import { anonymous } from "../../src/http/Principal.ts"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/TerminologyServer")<Server, TestServer>() {}

const gender = "http://hl7.org/fhir/administrative-gender"
const genderValueSet = "http://hl7.org/fhir/ValueSet/administrative-gender"
const actCode = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
const snomed = "http://snomed.info/sct"
const loinc = "http://loinc.org"
const v2Sex = "http://terminology.hl7.org/CodeSystem/v2-0001"
const genderToV2 = "http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2"

const authorized = (scopes: string): Authorized => ({ _tag: "Authorized", address: "127.0.0.1", clientId: "terminology-test", user: undefined, scopes: scopes.split(" "), patient: undefined })

/** The callers, by the name the test header carries; none: anonymous, which may do everything. */
const principals = {
  reader: authorized("user/CodeSystem.rs user/ValueSet.rs user/ConceptMap.rs"),
  genderOnly: authorized(`user/CodeSystem.rs?url=${gender} user/ValueSet.rs?url=${genderValueSet} user/ConceptMap.rs?url=${genderToV2}`),
  observationsOnly: authorized("user/Observation.rs")
}

const callerHeader = "x-test-principal"

const resolution = Layer.succeed(PrincipalResolution, (headers, address) => {
  const name = headers[callerHeader]
  return typeof name === "string" && name in principals ? principals[name as keyof typeof principals] : anonymous(address)
})

const get = (path: string, caller?: keyof typeof principals) =>
  Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}`, caller === undefined ? {} : { headers: { [callerHeader]: caller } }))

const post = (path: string, parameter: ReadonlyArray<Record<string, unknown>>) =>
  Effect.flatMap(Server, ({ base }) => call("POST", `${base}/${path}`, { body: { resourceType: "Parameters", parameter } }))

const q = (params: Record<string, string>) => new URLSearchParams(params).toString()

/** The values of the Parameters' parameters named `name`. */
const values = (reply: Reply, name: string): Array<unknown> =>
  (reply.json?.parameter ?? []).filter((p: any) => p.name === name).map((p: any) => {
    const key = Object.keys(p).find((k) => k.startsWith("value") || k === "resource" || k === "part")
    return key === undefined ? undefined : p[key]
  })

const one = (reply: Reply, name: string): unknown => values(reply, name)[0]

/** The lookup's properties as `code=value` texts. */
const properties = (reply: Reply): Array<string> =>
  (values(reply, "property") as Array<Array<any>>).map((part) => {
    const code = part.find((p) => p.name === "code").valueCode
    const found = part.find((p) => p.name === "value")
    const value = Object.entries(found ?? {}).find(([k]) => k.startsWith("value"))?.[1]
    return `${code}=${String(value)}`
  })

/** Each match of a translation as `equivalence system#code (map)`. */
const matches = (reply: Reply): Array<string> =>
  (values(reply, "match") as Array<Array<any>>).map((part) => {
    const concept = part.find((p) => p.name === "concept")?.valueCoding
    const source = part.find((p) => p.name === "source")?.valueUri
    return `${part.find((p) => p.name === "equivalence").valueCode} ${concept === undefined ? "-" : `${concept.system}#${concept.code}`} (${source})`
  })

const expectOutcome = (reply: Reply, status: number, diagnostics: string | RegExp) => {
  expect([reply.status, reply.json?.resourceType]).toEqual([status, "OperationOutcome"])
  const text = reply.json.issue.map((issue: any) => issue.diagnostics).join(" | ")
  if (typeof diagnostics === "string") expect(text).toContain(diagnostics)
  else expect(text).toMatch(diagnostics)
}

const ok = (reply: Reply) => {
  expect([reply.status, reply.status === 200 ? "" : reply.text.slice(0, 400)]).toEqual([200, ""])
  expect(reply.json.resourceType).toBe("Parameters")
  return reply
}

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`terminology operations on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } }).pipe(Effect.provide(resolution))),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("$lookup answers a code's name, version, display and properties, by system and code, coding, POST and instance", () =>
        Effect.gen(function*() {
          const male = ok(yield* get(`CodeSystem/$lookup?${q({ system: gender, code: "male" })}`))
          expect([one(male, "name"), one(male, "version"), one(male, "display")]).toEqual(["AdministrativeGender", "4.0.1", "Male"])
          expect(properties(male)).toEqual(["inactive=false", "definition=Male."])
          const token = ok(yield* get(`CodeSystem/$lookup?${q({ coding: `${gender}|female` })}`))
          expect(one(token, "display")).toBe("Female")
          const posted = ok(yield* post("CodeSystem/$lookup", [{ name: "coding", valueCoding: { system: gender, code: "unknown" } }]))
          expect(one(posted, "display")).toBe("Unknown")
          const instance = ok(yield* get("CodeSystem/administrative-gender/$lookup?code=other"))
          expect(one(instance, "display")).toBe("Other")
        }))

      it.effect("$lookup gives the hierarchy as parent and child properties, abstract concepts' notSelectable, and keeps to the properties asked for", () =>
        Effect.gen(function*() {
          const account = ok(yield* get(`CodeSystem/$lookup?${q({ system: actCode, code: "_ActAccountCode" })}`))
          const all = properties(account)
          expect(all).toEqual(expect.arrayContaining(["child=ACCTRECEIVABLE", "child=CASH", "notSelectable=true", "inactive=false"]))
          const receivable = ok(yield* get(`CodeSystem/$lookup?${q({ system: actCode, code: "ACCTRECEIVABLE" })}&property=parent`))
          expect(properties(receivable)).toEqual(["parent=_ActAccountCode"])
          const parent = (values(receivable, "property")[0] as Array<any>).find((p) => p.name === "description")
          expect(parent.valueString).toBe("ActAccountCode")
        }))

      it.effect("$lookup says honestly what it cannot answer: LOINC is not held (404), SNOMED CT is held without content (422), an unknown code is a 404", () =>
        Effect.gen(function*() {
          // The R4 page's own example.
          expectOutcome(yield* get(`CodeSystem/$lookup?${q({ system: loinc, code: "1963-8" })}`), 404, `The code system '${loinc}' is not known to this server`)
          const sct = yield* get(`CodeSystem/$lookup?${q({ system: snomed, code: "22298006" })}`)
          expectOutcome(sct, 422, "without its concepts (content 'not-present')")
          expect(sct.json.issue[0].code).toBe("not-supported")
          expectOutcome(yield* get(`CodeSystem/$lookup?${q({ system: gender, code: "xyz" })}`), 404, `The code 'xyz' is not in the code system '${gender}|4.0.1'`)
          const fragment = yield* get(`CodeSystem/$lookup?${q({ system: "http://terminology.hl7.org/CodeSystem/insurance-plan-type", code: "no-such-plan" })}`)
          expectOutcome(fragment, 404, "is not known here")
          expect(fragment.json.issue.map((issue: any) => issue.severity)).toEqual(["error", "warning"])
          expectOutcome(yield* get(`CodeSystem/$lookup?${q({ system: gender })}`), 400, "$lookup needs a code")
          expectOutcome(yield* get(`CodeSystem/$lookup?${q({ code: "male" })}`), 400, "$lookup needs the system")
          expectOutcome(yield* get(`CodeSystem/$lookup?${q({ system: gender, code: "male", colour: "red" })}`), 400, "Unknown parameter 'colour'")
          expectOutcome(yield* get(`ValueSet/$lookup?${q({ system: gender, code: "male" })}`), 404, "$lookup is defined on CodeSystem")
        }))

      it.effect("answers in XML when asked", () =>
        Effect.gen(function*() {
          const reply = yield* get(`CodeSystem/$lookup?${q({ system: gender, code: "male", _format: "xml" })}`)
          expect(reply.status).toBe(200)
          expect(reply.headers.get("content-type")).toContain("application/fhir+xml")
          expect(reply.text).toContain("<Parameters xmlns=\"http://hl7.org/fhir\">")
          expect(reply.text).toMatch(/<name value="display"\/>\s*<valueString value="Male"\/>/)
        }))

      it.effect("ValueSet/$validate-code: a member is valid with its display, another code is not, a wrong display is a warning", () =>
        Effect.gen(function*() {
          const valid = ok(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: gender, code: "male" })}`))
          expect([one(valid, "result"), one(valid, "display"), one(valid, "message")]).toEqual([true, "Male", undefined])
          const invalid = ok(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: gender, code: "xyz" })}`))
          expect(one(invalid, "result")).toBe(false)
          expect(one(invalid, "message")).toContain(`The code '${gender}#xyz' is not in the value set ${genderValueSet}`)
          const display = ok(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: gender, code: "male", display: "Man" })}`))
          expect([one(display, "result"), one(display, "display")]).toEqual([true, "Male"])
          expect(one(display, "message")).toBe(`Wrong Display Name 'Man' for ${gender}#male. Valid display is 'Male'`)
          expect((one(display, "issues") as any).issue.map((issue: any) => [issue.severity, issue.expression[0]])).toEqual([["warning", "Coding.display"]])
          const outside = ok(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: v2Sex, code: "M" })}`))
          expect(one(outside, "result")).toBe(false)
        }))

      it.effect("ValueSet/$validate-code takes a CodeableConcept, a coding, a value set given inline, an instance and a context", () =>
        Effect.gen(function*() {
          const concept = ok(yield* post("ValueSet/$validate-code", [
            { name: "url", valueUri: genderValueSet },
            { name: "codeableConcept", valueCodeableConcept: { coding: [{ system: v2Sex, code: "M" }, { system: gender, code: "female" }] } }
          ]))
          expect([one(concept, "result"), one(concept, "display")]).toEqual([true, "Female"])
          const inline = ok(yield* post("ValueSet/$validate-code", [
            { name: "valueSet", resource: { resourceType: "ValueSet", status: "active", compose: { include: [{ system: gender, concept: [{ code: "male" }] }] } } },
            { name: "coding", valueCoding: { system: gender, code: "female" } }
          ]))
          expect(one(inline, "result")).toBe(false)
          expect(one(inline, "message")).toContain("is not in the value set given in the request")
          const instance = ok(yield* get(`ValueSet/administrative-gender/$validate-code?${q({ system: gender, code: "unknown" })}`))
          expect(one(instance, "result")).toBe(true)
          const context = ok(yield* get(`ValueSet/$validate-code?${q({ context: "http://hl7.org/fhir/StructureDefinition/Patient#Patient.gender", system: gender, code: "other" })}`))
          expect(one(context, "result")).toBe(true)
        }))

      it.effect("$validate-code cannot decide codes of SNOMED CT or LOINC here: result false, saying so, with the system it lacks", () =>
        Effect.gen(function*() {
          const findings = ok(yield* get(`ValueSet/$validate-code?${q({ url: "http://hl7.org/fhir/ValueSet/clinical-findings", system: snomed, code: "22298006" })}`))
          expect(one(findings, "result")).toBe(false)
          expect(one(findings, "message")).toContain("could not be validated against the value set")
          expect(values(findings, "x-caused-by-unknown-system")).toEqual([snomed])
          expect((one(findings, "issues") as any).issue[0]).toMatchObject({ severity: "warning", code: "not-supported" })
          const sct = ok(yield* get(`CodeSystem/$validate-code?${q({ url: snomed, code: "22298006" })}`))
          expect([one(sct, "result"), values(sct, "x-caused-by-unknown-system")]).toEqual([false, [snomed]])
          expect(one(sct, "message")).toContain("without its content (content 'not-present')")
          expectOutcome(yield* get(`CodeSystem/$validate-code?${q({ url: loinc, code: "1963-8" })}`), 404, `The CodeSystem '${loinc}' is not known to this server`)
          // The R4 page's example, against a value set of every LOINC code.
          const observation = ok(yield* get(`ValueSet/$validate-code?${q({ url: "http://hl7.org/fhir/ValueSet/observation-codes", system: loinc, code: "1963-8", display: "test" })}`))
          expect([one(observation, "result"), values(observation, "x-caused-by-unknown-system")]).toEqual([false, [loinc]])
          expect(one(observation, "message")).toContain("could not be validated against the value set http://hl7.org/fhir/ValueSet/observation-codes")
        }))

      it.effect("CodeSystem/$validate-code checks the code, its display and, unless abstract is true, that it is not abstract", () =>
        Effect.gen(function*() {
          const male = ok(yield* get(`CodeSystem/$validate-code?${q({ url: gender, code: "male", display: "male" })}`))
          expect([one(male, "result"), one(male, "display"), one(male, "message")]).toEqual([true, "Male", undefined])
          const wrong = ok(yield* get(`CodeSystem/$validate-code?${q({ url: gender, code: "xyz" })}`))
          expect([one(wrong, "result"), one(wrong, "message")]).toEqual([false, `Unknown code 'xyz' in the CodeSystem '${gender}|4.0.1'`])
          const abstract = ok(yield* get(`CodeSystem/$validate-code?${q({ url: actCode, code: "_ActAccountCode" })}`))
          expect(one(abstract, "result")).toBe(false)
          expect(one(abstract, "message")).toContain("is abstract")
          expect(one(ok(yield* get(`CodeSystem/$validate-code?${q({ url: actCode, code: "_ActAccountCode", abstract: "true" })}`)), "result")).toBe(true)
          const instance = ok(yield* post("CodeSystem/administrative-gender/$validate-code", [{ name: "coding", valueCoding: { system: gender, code: "female" } }]))
          expect(one(instance, "result")).toBe(true)
          expectOutcome(yield* get(`CodeSystem/$validate-code?${q({ url: gender })}`), 400, "$validate-code needs what to validate")
          expectOutcome(yield* get(`ValueSet/$validate-code?${q({ url: "http://example.org/no-such-value-set", system: gender, code: "male" })}`), 404, "is not known to this server")
          expectOutcome(yield* get(`ValueSet/$validate-code?${q({ system: gender, code: "male" })}`), 400, "needs the value set")
        }))

      it.effect("$subsumes reads a v3 hierarchy: subsumes, subsumed-by, equivalent, not-subsumed", () =>
        Effect.gen(function*() {
          const outcome = (a: string, b: string) =>
            Effect.map(get(`CodeSystem/$subsumes?${q({ system: actCode, codeA: a, codeB: b })}`), (reply) => one(ok(reply), "outcome"))
          expect(yield* outcome("_ActAccountCode", "ACCTRECEIVABLE")).toBe("subsumes")
          expect(yield* outcome("ACCTRECEIVABLE", "_ActAccountCode")).toBe("subsumed-by")
          expect(yield* outcome("CASH", "CASH")).toBe("equivalent")
          expect(yield* outcome("CASH", "ACCTRECEIVABLE")).toBe("not-subsumed")
          const posted = ok(yield* post("CodeSystem/$subsumes", [
            { name: "codingA", valueCoding: { system: actCode, code: "_ActAccountCode" } },
            { name: "codingB", valueCoding: { system: actCode, code: "PBILLACCT" } }
          ]))
          expect(one(posted, "outcome")).toBe("subsumes")
          const instance = ok(yield* get(`CodeSystem/v3-ActCode/$subsumes?${q({ codeA: "PBILLACCT", codeB: "_ActAccountCode" })}`))
          expect(one(instance, "outcome")).toBe("subsumed-by")
          expectOutcome(yield* get(`CodeSystem/$subsumes?${q({ system: actCode, codeA: "CASH", codeB: "NOPE" })}`), 404, "The code 'NOPE' is not in the code system")
          // The R4 page's example: SNOMED CT, held without its concepts.
          expectOutcome(yield* get(`CodeSystem/$subsumes?${q({ system: snomed, codeA: "235856003", codeB: "3738000" })}`), 422, "without its concepts")
          expectOutcome(yield* get(`CodeSystem/$subsumes?${q({ codeA: "CASH", codeB: "CC" })}`), 400, "needs the code system")
          expectOutcome(yield* post("CodeSystem/$subsumes", [
            { name: "codingA", valueCoding: { system: actCode, code: "CASH" } },
            { name: "codingB", valueCoding: { system: gender, code: "male" } }
          ]), 422, "knows no relation between code systems")
        }))

      it.effect("$translate maps with the R4 ConceptMaps, both ways, by url, source value set, target system and instance", () =>
        Effect.gen(function*() {
          const other = ok(yield* get(`ConceptMap/$translate?${q({ url: genderToV2, system: gender, code: "other" })}`))
          expect(one(other, "result")).toBe(true)
          expect(matches(other)).toEqual([`wider ${v2Sex}#A (${genderToV2})`, `wider ${v2Sex}#O (${genderToV2})`])
          const back = ok(yield* get(`ConceptMap/$translate?${q({ url: genderToV2, system: v2Sex, code: "A", reverse: "true" })}`))
          expect(matches(back)).toEqual([`narrower ${gender}#other (${genderToV2})`])
          const bySource = ok(yield* get(`ConceptMap/$translate?${q({ source: genderValueSet, system: gender, code: "male" })}`))
          expect(matches(bySource).sort()).toEqual([
            `equal ${v2Sex}#M (${genderToV2})`,
            "equal http://terminology.hl7.org/CodeSystem/v3-AdministrativeGender#M (http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v3)"
          ])
          const toV2 = ok(yield* get(`ConceptMap/$translate?${q({ system: gender, code: "male", targetsystem: v2Sex })}`))
          expect(matches(toV2)).toEqual([`equal ${v2Sex}#M (${genderToV2})`])
          const instance = ok(yield* post("ConceptMap/cm-administrative-gender-v2/$translate", [{ name: "coding", valueCoding: { system: gender, code: "unknown" } }]))
          expect(matches(instance)).toEqual([`equal ${v2Sex}#U (${genderToV2})`])
          const concept = ok(yield* post("ConceptMap/$translate", [
            { name: "url", valueUri: genderToV2 },
            { name: "codeableConcept", valueCodeableConcept: { coding: [{ code: "no-system" }, { system: gender, code: "female" }], text: "F" } }
          ]))
          expect(matches(concept)).toEqual([`equal ${v2Sex}#F (${genderToV2})`])
        }))

      it.effect("$translate answers the R4 page's example: composition-status preliminary to v3 ActStatus", () =>
        Effect.gen(function*() {
          const reply = ok(yield* get(`ConceptMap/$translate?${q({
            system: "http://hl7.org/fhir/composition-status",
            code: "preliminary",
            source: "http://hl7.org/fhir/ValueSet/composition-status",
            target: "http://terminology.hl7.org/ValueSet/v3-ActStatus"
          })}`))
          expect([one(reply, "result"), matches(reply)]).toEqual([true, ["equivalent http://terminology.hl7.org/CodeSystem/v3-ActStatus#active (http://hl7.org/fhir/ConceptMap/cm-composition-status-v3)"]])
        }))

      it.effect("$translate applies a group's unmapped code and counts a disjoint match as no translation", () =>
        Effect.gen(function*() {
          const map = "http://hl7.org/fhir/ConceptMap/101"
          const billing = ok(yield* get(`ConceptMap/$translate?${q({ url: map, system: "http://hl7.org/fhir/address-use", code: "billing" })}`))
          expect([one(billing, "result"), matches(billing)]).toEqual([true, [`inexact http://terminology.hl7.org/CodeSystem/v3-AddressUse#temp (${map})`]])
          expect(one(billing, "message")).toContain("unmapped mode 'fixed'")
          const old = ok(yield* get(`ConceptMap/$translate?${q({ url: map, system: "http://hl7.org/fhir/address-use", code: "old" })}`))
          expect([one(old, "result"), matches(old)]).toEqual([false, [`disjoint http://terminology.hl7.org/CodeSystem/v3-AddressUse#BAD (${map})`]])
          const none = ok(yield* get(`ConceptMap/$translate?${q({ url: genderToV2, system: v2Sex, code: "M" })}`))
          expect([one(none, "result"), matches(none)]).toEqual([false, []])
          expect(one(none, "message")).toContain("No mapping of")
        }))

      it.effect("$translate weighs dependsOn against the dependencies given, with a map given inline", () =>
        Effect.gen(function*() {
          const map = {
            resourceType: "ConceptMap",
            url: "http://example.org/ConceptMap/sites",
            status: "draft",
            group: [{
              source: "http://example.org/site",
              target: "http://example.org/body",
              element: [{
                code: "arm",
                target: [
                  { code: "left-arm", equivalence: "narrower", dependsOn: [{ property: "http://example.org/laterality", value: "left" }] },
                  { code: "right-arm", equivalence: "narrower", dependsOn: [{ property: "http://example.org/laterality", value: "right" }] }
                ]
              }]
            }]
          }
          const translate = (dependency: ReadonlyArray<Record<string, unknown>>) =>
            Effect.map(post("ConceptMap/$translate", [
              { name: "conceptMap", resource: map },
              { name: "coding", valueCoding: { system: "http://example.org/site", code: "arm" } },
              ...dependency
            ]), ok)
          const left = yield* translate([{
            name: "dependency",
            part: [{ name: "element", valueUri: "http://example.org/laterality" }, { name: "concept", valueCodeableConcept: { coding: [{ code: "left" }] } }]
          }])
          expect(matches(left)).toEqual(["narrower http://example.org/body#left-arm (http://example.org/ConceptMap/sites)"])
          const unknown = yield* translate([])
          expect(matches(unknown)).toHaveLength(2)
          expect(one(unknown, "message")).toContain("which the request did not give")
        }))

      it.effect("a ConceptMap written over REST is used by $translate: at once on its instance, by url once the catalog is rebuilt", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const url = "http://example.org/ConceptMap/colours"
          const written = yield* call("POST", `${server.base}/ConceptMap`, {
            body: {
              resourceType: "ConceptMap",
              url,
              status: "draft",
              group: [{ source: "http://example.org/colour", target: "http://example.org/farbe", element: [{ code: "red", target: [{ code: "rot", equivalence: "equal" }] }] }]
            }
          })
          expect([written.status, written.text.slice(0, 300)]).toEqual([201, written.text.slice(0, 300)])
          const instance = ok(yield* get(`ConceptMap/${written.json.id}/$translate?${q({ system: "http://example.org/colour", code: "red" })}`))
          expect(matches(instance)).toEqual([`equal http://example.org/farbe#rot (${url})`])
          yield* server.searchIndexed
          const byUrl = ok(yield* get(`ConceptMap/$translate?${q({ url, system: "http://example.org/colour", code: "red" })}`))
          expect(matches(byUrl)).toEqual([`equal http://example.org/farbe#rot (${url})`])
          const found = ok(yield* get(`ConceptMap/$translate?${q({ system: "http://example.org/colour", code: "red", targetsystem: "http://example.org/farbe" })}`))
          expect(matches(found)).toEqual([`equal http://example.org/farbe#rot (${url})`])
          expect((yield* call("DELETE", `${server.base}/ConceptMap/${written.json.id}`)).status).toBe(204)
          expectOutcome(yield* get(`ConceptMap/${written.json.id}/$translate?${q({ system: "http://example.org/colour", code: "red" })}`), 410, "was deleted")
          yield* server.searchIndexed
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ url, system: "http://example.org/colour", code: "red" })}`), 404, "is not known to this server")
        }))

      it.effect("$translate refuses what it cannot read: no code, a code without a system, an unknown map", () =>
        Effect.gen(function*() {
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ url: genderToV2 })}`), 400, "$translate needs the code to translate")
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ url: genderToV2, code: "male" })}`), 400, "needs the system of the code 'male'")
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ url: "http://example.org/no-such-map", system: gender, code: "male" })}`), 404, "is not known to this server")
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ url: genderToV2, system: gender, code: "male", dependency: "x" })}`), 400, "goes in a Parameters body")
        }))

      it.effect("under scopes: read on the type is needed, and a grant restricted by url reaches only what it names", () =>
        Effect.gen(function*() {
          const lookup = (system: string, code: string, caller: keyof typeof principals) => get(`CodeSystem/$lookup?${q({ system, code })}`, caller)
          const refused = yield* lookup(gender, "male", "observationsOnly")
          expectOutcome(refused, 403, "do not allow reading CodeSystem")
          expect(one(ok(yield* lookup(gender, "male", "reader")), "display")).toBe("Male")
          expect(one(ok(yield* lookup(gender, "male", "genderOnly")), "display")).toBe("Male")
          expectOutcome(yield* lookup(actCode, "CASH", "genderOnly"), 404, `The code system '${actCode}' is not known to this server`)
          expectOutcome(yield* get("CodeSystem/v3-ActCode/$subsumes?codeA=CASH&codeB=CASH", "genderOnly"), 404, "CodeSystem/v3-ActCode is not known")
          expect(one(ok(yield* get("CodeSystem/v3-ActCode/$subsumes?codeA=CASH&codeB=CASH", "reader")), "outcome")).toBe("equivalent")
          expect(one(ok(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: gender, code: "male" })}`, "genderOnly")), "result")).toBe(true)
          expectOutcome(yield* get(`ValueSet/$validate-code?${q({ url: "http://hl7.org/fhir/ValueSet/address-use", system: "http://hl7.org/fhir/address-use", code: "home" })}`, "genderOnly"), 404, "is not known")
          expectOutcome(yield* get(`ValueSet/$validate-code?${q({ url: genderValueSet, system: gender, code: "male" })}`, "observationsOnly"), 403, "ValueSet")
          expect(matches(ok(yield* get(`ConceptMap/$translate?${q({ system: gender, code: "male" })}`, "genderOnly")))).toEqual([`equal ${v2Sex}#M (${genderToV2})`])
          expectOutcome(yield* get(`ConceptMap/$translate?${q({ system: gender, code: "male" })}`, "observationsOnly"), 403, "ConceptMap")
        }))
    })
  })
}
