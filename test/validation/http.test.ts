/**
 * Validation as a client meets it, over HTTP with the real R4 packages: 422 on an invalid write, the two
 * reference policies, and `$validate` in its modes. On SQLite and Postgres (strict), and SQLite (fhir).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ValidationServer")<Server, TestServer>() {}

const packages = { package_registry: registryUrl ?? "", package_cache: realPackageCache }
const observation = (extra: Record<string, unknown> = {}) => ({ resourceType: "Observation", status: "final", code: { text: "weight" }, ...extra })
const urn = () => `urn:uuid:${randomUUID()}`

const servers = [
  { name: "strict on sqlite", kind: "sqlite" as const, policy: "strict" as const, skip: false },
  { name: "strict on postgres", kind: "postgres" as const, policy: "strict" as const, skip: !pgAvailable },
  { name: "fhir on sqlite", kind: "sqlite" as const, policy: "fhir" as const, skip: false }
]

for (const server of servers) {
  describe.skipIf(skipRealPackages || server.skip)(`validation, reference policy ${server.name}`, () => {
    layer(
      Layer.scoped(Server, startServer(server.kind, {
        conformance: { ...packages, reference_policy: server.policy },
        validation: { allowed_extension_domains: ["http://allowed.test/"] }
      })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("an invalid resource is a 422 listing every error with its path; warnings do not block", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const bad = yield* call("POST", `${base}/Patient`, {
            body: { resourceType: "Patient", gender: "bogus", birthDate: "2020-13-01", nickname: "x" }
          })
          expect(bad.status).toBe(422)
          expect(bad.json.resourceType).toBe("OperationOutcome")
          const errors = bad.json.issue.filter((issue: any) => issue.severity === "error")
          expect(errors.map((issue: any) => issue.expression?.[0]).sort()).toEqual(["Patient.birthDate", "Patient.gender", "Patient.nickname"])
          for (const issue of errors) expect(issue.diagnostics.length).toBeGreaterThan(10)
          const noStatus = yield* call("POST", `${base}/Observation`, { body: { resourceType: "Observation", code: { text: "x" } } })
          expect(noStatus.status).toBe(422)
          expect(noStatus.text).toContain("Observation.status")
          // An extension the server has no definition for is refused, unless its domain is allowed
          // (validation.allowed_extension_domains); the specification's example domains are not allowed by default.
          const unknown = yield* call("POST", `${base}/Patient`, {
            body: { resourceType: "Patient", extension: [{ url: "http://unknown.test/ext", valueString: "x" }] }
          })
          expect(unknown.status).toBe(422)
          expect(unknown.text).toContain("Unknown extension http://unknown.test/ext")
          const allowed = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", extension: [{ url: "http://allowed.test/ext", valueString: "x" }] } })
          expect(allowed.status).toBe(201)
          const example = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", extension: [{ url: "http://example.org/unknown-extension", valueString: "x" }] } })
          expect(example.status).toBe(422)
          // Updates, patches and every entry of a Bundle are checked the same way.
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender: "female" } })
          expect((yield* call("PUT", `${base}/Patient/${patient.id}`, { body: { resourceType: "Patient", id: patient.id, gender: "nope" } })).status).toBe(422)
          const patched = yield* call("PATCH", `${base}/Patient/${patient.id}`, {
            body: JSON.stringify([{ op: "replace", path: "/gender", value: "nope" }]),
            headers: { "content-type": "application/json-patch+json" }
          })
          expect(patched.status).toBe(422)
          const transaction = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "transaction", entry: [
              { resource: { resourceType: "Patient" }, request: { method: "POST", url: "Patient" } },
              { resource: { resourceType: "Patient", gender: "nope" }, request: { method: "POST", url: "Patient" } }
            ] }
          })
          expect(transaction.status).toBe(422)
          expect(transaction.json.issue[0].diagnostics).toContain("Bundle.entry[1]")
          const batch = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "batch", entry: [{ resource: { resourceType: "Patient", gender: "nope" }, request: { method: "POST", url: "Patient" } }] }
          })
          expect(batch.json.entry[0].response.status).toBe("422 Unprocessable Entity")
          expect(batch.json.entry[0].response.outcome.issue[0].expression).toEqual(["Patient.gender"])
          expect((yield* call("GET", `${base}/Patient/${patient.id}`)).json.gender).toBe("female")
        }))

      it.effect("references: held targets, types the element allows, contained and deep references, and earlier entries of a transaction", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const strict = server.policy === "strict"
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const create = (body: Record<string, unknown>) => Effect.map(call("POST", `${base}/${String(body["resourceType"])}`, { body }), (reply) => reply)
          expect((yield* create(observation({ subject: { reference: `Patient/${patient.id}` } }))).status).toBe(201)
          // Our own base as an absolute URL is local.
          expect((yield* create(observation({ subject: { reference: `${base}/Patient/${patient.id}` } }))).status).toBe(201)
          // A target the server does not hold.
          const missing = yield* create(observation({ subject: { reference: "Patient/no-such-patient" } }))
          expect(missing.status).toBe(strict ? 422 : 201)
          if (strict) {
            expect(missing.json.issue[0]).toMatchObject({ code: "not-found", expression: ["Observation.subject"] })
            expect(missing.json.issue[0].diagnostics).toContain("Patient/no-such-patient")
          }
          // Another server's resource.
          expect((yield* create(observation({ subject: { reference: "http://elsewhere.example/fhir/Patient/1" } }))).status).toBe(strict ? 422 : 201)
          // A type the element does not allow, under either policy.
          const { json: practitioner } = yield* call("POST", `${base}/Practitioner`, { body: { resourceType: "Practitioner" } })
          const wrongType = yield* create(observation({ subject: { reference: `Practitioner/${practitioner.id}` } }))
          expect(wrongType.status).toBe(422)
          expect(wrongType.json.issue[0].diagnostics).toContain("Practitioner")
          // Only an identifier: fine.
          expect((yield* create(observation({ subject: { identifier: { system: "http://ids.example", value: "1" } } }))).status).toBe(201)
          // Contained references must resolve inside the resource.
          const contained = observation({ contained: [{ resourceType: "Patient", id: "p1" }], subject: { reference: "#p1" } })
          expect((yield* create(contained)).status).toBe(201)
          const danglingContained = yield* create(observation({ subject: { reference: "#nothing" } }))
          expect(danglingContained.status).toBe(422)
          // Deep: in an extension, and inside a contained resource.
          const deep = yield* create(observation({
            extension: [{ url: "http://allowed.test/focus", valueReference: { reference: "Patient/deep-missing" } }]
          }))
          expect(deep.status).toBe(strict ? 422 : 201)
          const inContained = yield* create(observation({
            contained: [{ resourceType: "Provenance", id: "prov", target: [{ reference: "#" }], recorded: "2020-01-01T00:00:00Z", agent: [{ who: { reference: "Practitioner/not-held" } }] }],
            extension: [{ url: "http://allowed.test/prov", valueReference: { reference: "#prov" } }]
          }))
          expect(inContained.status).toBe(strict ? 422 : 201)
          // A transaction: an entry may refer to a resource another entry creates, whatever their order.
          const patientUrl = urn()
          const transaction = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "transaction", entry: [
              { resource: observation({ subject: { reference: patientUrl } }), request: { method: "POST", url: "Observation" } },
              { fullUrl: patientUrl, resource: { resourceType: "Patient" }, request: { method: "POST", url: "Patient" } }
            ] }
          })
          expect(transaction.status).toBe(200)
          // A deleted target is not held.
          yield* call("DELETE", `${base}/Patient/${patient.id}`)
          expect((yield* create(observation({ subject: { reference: `Patient/${patient.id}` } }))).status).toBe(strict ? 422 : 201)
        }))

      it.effect("$validate answers 200 with every issue, in create, update, delete and profile modes", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const invalid = yield* call("POST", `${base}/Patient/$validate`, { body: { resourceType: "Patient", gender: "bogus" } })
          expect(invalid.status).toBe(200)
          expect(invalid.json.resourceType).toBe("OperationOutcome")
          expect(invalid.json.issue.some((issue: any) => issue.severity === "error" && issue.expression?.[0] === "Patient.gender")).toBe(true)
          const valid = yield* call("POST", `${base}/Patient/$validate`, { body: { resourceType: "Patient", gender: "female" } })
          expect(valid.status).toBe(200)
          expect(valid.json.issue.filter((issue: any) => issue.severity === "error")).toEqual([])
          // The allowed extension domains apply as on a write.
          for (const [url, refused] of [["http://unknown.test/ext", true], ["http://allowed.test/ext", false]] as const) {
            const checked = yield* call("POST", `${base}/Patient/$validate`, { body: { resourceType: "Patient", extension: [{ url, valueString: "x" }] } })
            expect(checked.json.issue.some((issue: any) => issue.severity === "error" && issue.diagnostics.includes(url))).toBe(refused)
          }
          // As the `resource` parameter of a Parameters body, with a mode.
          const asParameters = yield* call("POST", `${base}/Patient/$validate`, {
            body: { resourceType: "Parameters", parameter: [{ name: "resource", resource: { resourceType: "Patient", birthDate: "1970-02-30" } }, { name: "mode", valueCode: "create" }] }
          })
          expect(asParameters.json.issue[0].expression).toEqual(["Patient.birthDate"])
          // Update mode checks the instance's id.
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const update = yield* call("POST", `${base}/Patient/${patient.id}/$validate?mode=update`, { body: { resourceType: "Patient", id: "other" } })
          expect(update.json.issue[0]).toMatchObject({ severity: "error", expression: ["Patient.id"] })
          const updateOk = yield* call("POST", `${base}/Patient/${patient.id}/$validate?mode=update`, { body: { resourceType: "Patient", id: patient.id } })
          expect(updateOk.json.issue.filter((issue: any) => issue.severity === "error")).toEqual([])
          // Delete mode: the instance must exist.
          expect((yield* call("POST", `${base}/Patient/${patient.id}/$validate?mode=delete`)).status).toBe(200)
          expect((yield* call("POST", `${base}/Patient/nobody/$validate?mode=delete`)).status).toBe(404)
          // A profile: unknown is an error issue naming it; a known one is checked.
          const unknownProfile = yield* call("POST", `${base}/Patient/$validate?profile=${encodeURIComponent("http://example.org/no-such-profile")}`, { body: { resourceType: "Patient" } })
          expect(unknownProfile.status).toBe(200)
          expect(unknownProfile.json.issue[0]).toMatchObject({ severity: "error" })
          expect(unknownProfile.json.issue[0].diagnostics).toContain("http://example.org/no-such-profile")
          const vitals = yield* call("POST", `${base}/Observation/$validate?profile=${encodeURIComponent("http://hl7.org/fhir/StructureDefinition/vitalsigns")}`, {
            body: observation()
          })
          expect(vitals.json.issue.some((issue: any) => issue.severity === "error")).toBe(true)
          // The reference policy applies as on a write.
          const reference = yield* call("POST", `${base}/Observation/$validate`, { body: observation({ subject: { reference: "Patient/not-here" } }) })
          expect(reference.json.issue.some((issue: any) => issue.severity === "error")).toBe(server.policy === "strict")
          // Wrong input is a 400, a body of another type too.
          expect((yield* call("POST", `${base}/Patient/$validate`, { body: { resourceType: "Observation" } })).status).toBe(400)
          expect((yield* call("POST", `${base}/Patient/$validate?mode=sideways`, { body: { resourceType: "Patient" } })).status).toBe(400)
          expect((yield* call("POST", `${base}/Patient/$validate`, { body: "{not json", headers: { "content-type": "application/fhir+json" } })).status).toBe(400)
        }))

      it.effect("$validate on Parameters: a body of other parameters than resource, mode and profile is the resource validated", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const patient = { name: "member", resource: { resourceType: "Patient", id: "member-1", gender: "female" } }
          const coverage = (beneficiary: string) => ({
            name: "coverage",
            resource: { resourceType: "Coverage", id: "c1", status: "active", beneficiary: { reference: beneficiary }, payor: [{ display: "Payer" }] }
          })
          // The resources of the Parameters count as present for its references, under either policy.
          const own = yield* call("POST", `${base}/Parameters/$validate`, { body: { resourceType: "Parameters", parameter: [patient, coverage("Patient/member-1")] } })
          expect(own.status).toBe(200)
          expect(own.json.issue.filter((issue: any) => issue.severity === "error")).toEqual([])
          const elsewhere = yield* call("POST", `${base}/Parameters/$validate`, { body: { resourceType: "Parameters", parameter: [patient, coverage("Patient/member-2")] } })
          const unresolved = elsewhere.json.issue.filter((issue: any) => issue.severity === "error")
          expect(unresolved.map((issue: any) => issue.expression?.[0])).toEqual(server.policy === "strict" ? ["Parameters.parameter[1].resource.beneficiary"] : [])
          // Its content is checked as a Parameters' content.
          const bad = yield* call("POST", `${base}/Parameters/$validate`, { body: { resourceType: "Parameters", parameter: [{ name: "x", valueDate: "2020-02-30" }] } })
          expect(bad.status).toBe(200)
          expect(bad.json.issue[0]).toMatchObject({ severity: "error", expression: ["Parameters.parameter[0].value.ofType(date)"] })
          // Made only of the operation's parameters, it is the operation's input.
          const input = yield* call("POST", `${base}/Parameters/$validate`, {
            body: { resourceType: "Parameters", parameter: [{ name: "resource", resource: { resourceType: "Parameters", parameter: [{ name: "x", valueDate: "2020-02-30" }] } }, { name: "mode", valueCode: "create" }] }
          })
          expect(input.json.issue[0]).toMatchObject({ severity: "error", expression: ["Parameters.parameter[0].value.ofType(date)"] })
          const wrapped = yield* call("POST", `${base}/Parameters/$validate`, { body: { resourceType: "Parameters", parameter: [{ name: "resource", resource: { resourceType: "Patient" } }] } })
          expect(wrapped.status).toBe(400)
        }))
    })
  })
}

/** A blood pressure coded 55284-4 without the 85354-9 the vital signs profile fixes, as Synthea writes them. */
const bloodPressure = {
  resourceType: "Observation", status: "final",
  category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }],
  code: { coding: [{ system: "http://loinc.org", code: "55284-4" }] },
  subject: { display: "someone" }, effectiveDateTime: "2020-01-01",
  component: [
    { code: { coding: [{ system: "http://loinc.org", code: "8480-6" }] }, valueQuantity: { value: 120, unit: "mm[Hg]", system: "http://unitsofmeasure.org", code: "mm[Hg]" } },
    { code: { coding: [{ system: "http://loinc.org", code: "8462-4" }] }, valueQuantity: { value: 80, unit: "mm[Hg]", system: "http://unitsofmeasure.org", code: "mm[Hg]" } }
  ]
}

const intake = { resourceType: "QuestionnaireResponse", status: "completed", questionnaire: "http://example.org/Questionnaire/intake" }

for (const settings of [{}, { allow_example_urls: true, vital_signs: "warning" as const }]) {
  const relaxed = "allow_example_urls" in settings
  describe.skipIf(skipRealPackages)(`validation ${relaxed ? "with allow_example_urls and vital_signs = warning" : "by default"}`, () => {
    layer(
      Layer.scoped(Server, startServer("sqlite", { conformance: packages, validation: settings })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect(relaxed ? "example URLs and vital signs findings do not block a write" : "a write with an example-domain canonical or a blood pressure without 85354-9 is a 422", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const response = yield* call("POST", `${base}/QuestionnaireResponse`, { body: intake })
          const observation = yield* call("POST", `${base}/Observation`, { body: bloodPressure })
          if (relaxed) {
            expect(response.status).toBe(201)
            expect(observation.status).toBe(201)
          } else {
            expect(response.status).toBe(422)
            expect(response.text).toContain("Example URLs are not allowed in this context (http://example.org/Questionnaire/intake)")
            expect(observation.status).toBe(422)
            expect(observation.text).toContain("slice 'BPCode' requires at least 1")
          }
          // $validate answers the same, as issues.
          const validated = yield* call("POST", `${base}/Observation/$validate`, { body: bloodPressure })
          const bpCode = validated.json.issue.find((issue: any) => issue.diagnostics.includes("BPCode"))
          expect(bpCode.severity).toBe(relaxed ? "warning" : "error")
        }))
    })
  })
}
