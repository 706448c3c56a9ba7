/**
 * What the scope enforcement tests share: callers known by fixed principals (resolved from a test header,
 * as a front door resolves a token), a server that resolves them, and two patients' records with references
 * between them. Patient A (`pa`) and patient B (`pb`) each have Encounters, Observations (laboratory and vital
 * signs) and Conditions; A's laboratory Observation is derived from B's, and a Practitioner is shared.
 */
import { Effect, Layer } from "effect"
import type { Authorized, Principal } from "../../src/http/Principal.ts"
import { anonymous } from "../../src/http/Principal.ts"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import type { BackendKind } from "../support/backends.ts"
import { realPackageCache, registryUrl } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

const authorized = (scopes: string, patient?: string): Authorized => ({
  _tag: "Authorized",
  address: "127.0.0.1",
  clientId: "enforcement-test",
  user: "someone",
  scopes: scopes.split(" "),
  patient
})

/** The callers of the tests, by the name the test header carries. One object each: access is cached per principal. */
export const principals = {
  /** v2, patient A's whole record, read and search. */
  patientA: authorized("launch/patient openid patient/*.rs", "pa"),
  /** v1, the same. */
  patientAv1: authorized("patient/*.read", "pa"),
  /** v2, patient B's record. */
  patientB: authorized("patient/*.rs", "pb"),
  /** Only Observations (and not Patients) of patient A. */
  observationsA: authorized("patient/Observation.rs", "pa"),
  /** Only laboratory Observations of patient A, with A's Patient resource. */
  labsA: authorized("patient/Observation.rs?category=laboratory patient/Patient.rs", "pa"),
  /** Everything of patient A's record, v2 (cruds). */
  writerA: authorized("patient/*.cruds", "pa"),
  /** Everything of patient A's record, v1 (read and write). */
  writerAv1: authorized("patient/*.read patient/*.write", "pa"),
  /** Read only, v1: no write. */
  readerAv1: authorized("patient/*.read", "pa"),
  /** Laboratory Observations only may be created and read. */
  labWriterA: authorized("patient/Observation.crs?category=laboratory patient/Patient.r", "pa"),
  /** Patient scopes, but the token names no patient: nothing. */
  noPatient: authorized("patient/*.rs"),
  /** A user's Observations: every Observation (svc keeps no per-user lists), nothing else. */
  userObservations: authorized("user/Observation.read"),
  /** The whole server, read and search. */
  systemReader: authorized("system/*.rs"),
  /** The whole server, everything. */
  systemAll: authorized("system/*.cruds"),
  /** Only AuditEvent: no FHIR data of the seeded types. */
  auditOnly: authorized("system/AuditEvent.read")
} satisfies Record<string, Principal>

export type Caller = keyof typeof principals | "anonymous"

const header = "x-test-principal"

/** The test header's principal, or an anonymous caller: what a front door does with tokens, without tokens. */
export const resolutionLayer = Layer.succeed(PrincipalResolution, (headers, address) => {
  const name = headers[header]
  return typeof name === "string" && name in principals ? principals[name as keyof typeof principals] : anonymous(address)
})

/** A server on `kind` with the real R4 packages, PUT creating under client ids, callers resolved by `resolutionLayer`. */
export const startEnforcedServer = (kind: BackendKind): Effect.Effect<TestServer, unknown, import("effect").Scope.Scope> =>
  startServer(kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true } }).pipe(
    Effect.provide(resolutionLayer)
  )

/** One request by `caller` to `path` under the server's base (or a whole URL). */
export const as = (server: TestServer, caller: Caller, method: string, path: string, options: { readonly body?: unknown; readonly headers?: Record<string, string> } = {}): Effect.Effect<Reply> =>
  call(method, path.startsWith("http") ? path : `${server.base}/${path}`, {
    ...options,
    headers: { ...options.headers, ...(caller === "anonymous" ? {} : { [header]: caller }) }
  })

export const laboratory = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "laboratory" }] }
export const vitalSigns = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }

export const observation = (id: string, patient: string, category: unknown, code: string, extra: Record<string, unknown> = {}) => ({
  resourceType: "Observation",
  id,
  status: "final",
  category: [category],
  code: { coding: [{ system: "http://example.org/codes", code }] },
  subject: { reference: `Patient/${patient}` },
  ...extra
})

/** The seeded records: every resource by id, with the patient it belongs to (undefined: shared). */
export const seeded: ReadonlyArray<{ readonly resource: Record<string, unknown>; readonly patient: "pa" | "pb" | undefined }> = [
  { resource: { resourceType: "Practitioner", id: "dr", name: [{ family: "Shared" }] }, patient: undefined },
  { resource: { resourceType: "Patient", id: "pa", name: [{ family: "Ayy" }], generalPractitioner: [{ reference: "Practitioner/dr" }] }, patient: "pa" },
  { resource: { resourceType: "Patient", id: "pb", name: [{ family: "Bee" }], generalPractitioner: [{ reference: "Practitioner/dr" }] }, patient: "pb" },
  { resource: { resourceType: "Encounter", id: "ea", status: "finished", class: { code: "AMB" }, subject: { reference: "Patient/pa" } }, patient: "pa" },
  { resource: { resourceType: "Encounter", id: "eb", status: "finished", class: { code: "AMB" }, subject: { reference: "Patient/pb" } }, patient: "pb" },
  {
    resource: observation("ob-lab", "pb", laboratory, "b-lab", { encounter: { reference: "Encounter/eb" }, identifier: [{ system: "http://example.org/ids", value: "shared-1" }] }),
    patient: "pb"
  },
  { resource: observation("ob-vital", "pb", vitalSigns, "b-vital"), patient: "pb" },
  {
    resource: observation("oa-lab", "pa", laboratory, "a-lab", {
      encounter: { reference: "Encounter/ea" },
      performer: [{ reference: "Practitioner/dr" }],
      derivedFrom: [{ reference: "Observation/ob-lab" }]
    }),
    patient: "pa"
  },
  { resource: observation("oa-vital", "pa", vitalSigns, "a-vital"), patient: "pa" },
  { resource: { resourceType: "Condition", id: "ca", subject: { reference: "Patient/pa" }, encounter: { reference: "Encounter/ea" }, code: { text: "a" } }, patient: "pa" },
  { resource: { resourceType: "Condition", id: "cb", subject: { reference: "Patient/pb" }, code: { text: "b" } }, patient: "pb" }
]

/** `Type/id` of a seeded resource. */
export const refOf = (resource: Record<string, unknown>): string => `${String(resource["resourceType"])}/${String(resource["id"])}`

/** Every seeded resource of patient B, as `Type/id`. */
export const bRecord: ReadonlySet<string> = new Set(seeded.filter((one) => one.patient === "pb").map((one) => refOf(one.resource)))

/** Writes the seeded records in one transaction, as an anonymous caller (the server without tokens). */
export const seed = (server: TestServer) =>
  Effect.gen(function*() {
    const reply = yield* as(server, "anonymous", "POST", "", {
      body: {
        resourceType: "Bundle",
        type: "transaction",
        entry: seeded.map(({ resource }) => ({ resource, request: { method: "PUT", url: refOf(resource) } }))
      }
    })
    if (reply.status !== 200) throw new Error(`seeding failed: ${reply.status} ${reply.text.slice(0, 500)}`)
    yield* server.searchIndexed
  })

/** Every `Type/id` a reply shows, anywhere in it: resources of a Bundle (entries, nested Bundles) or the resource itself. */
export const shown = (reply: Reply): Array<string> => {
  const found: Array<string> = []
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit)
    else if (typeof value === "object" && value !== null) {
      const object = value as Record<string, unknown>
      if (typeof object["resourceType"] === "string" && typeof object["id"] === "string" && object["resourceType"] !== "Bundle" &&
        object["resourceType"] !== "OperationOutcome") {
        found.push(`${object["resourceType"]}/${object["id"]}`)
      }
      for (const key in object) visit(object[key])
    }
  }
  visit(reply.json)
  return found
}

/** The `Type/id` of a searchset's matches, sorted. */
export const matches = (reply: Reply): Array<string> =>
  (reply.json?.entry ?? []).filter((e: any) => e.search?.mode === "match").map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()

/** The `Type/id` of a searchset's included resources, sorted. */
export const included = (reply: Reply): Array<string> =>
  (reply.json?.entry ?? []).filter((e: any) => e.search?.mode === "include").map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()

/** Whether a reply shows none of patient B's seeded resources. */
export const showsNothingOfB = (reply: Reply): boolean => shown(reply).every((ref) => !bRecord.has(ref))
