/**
 * A part of the scope matrix through the real server on a SQLite file (where the fast read and search answer
 * `GET /fhir/{type}/{id}` and `GET /fhir/{type}?...` outside the Effect edge) and on Postgres: a restricted
 * token is answered by the general path, which applies its restriction; a token with a whole grant stays on
 * the fast path; the answers are the same on both stores.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { call, type TestServer } from "../support/server.ts"
import { as, type Caller, included, laboratory, matches, observation, seed, showsNothingOfB, startEnforcedServer } from "./enforcementSupport.ts"

class Server extends Context.Tag("test/EnforcementRealServer")<Server, TestServer>() {}

const send = (caller: Caller, method: string, path: string, body?: unknown) =>
  Effect.flatMap(Server, (server) => as(server, caller, method, path, body === undefined ? {} : { body }))

/** What the fast path has answered so far (SQLite only). */
const fastCounts = Effect.flatMap(Server, (server) =>
  Effect.map(call("GET", `${server.url}/healthz?verbose=1`), (reply) => reply.json.fast_path as { reads: number; searches: number } | undefined))

const kinds: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const { kind, skip } of kinds) {
  describe.skipIf(skipRealPackages || skip)(`scope enforcement through the server on ${kind}`, () => {
    layer(Layer.scoped(Server, Effect.tap(startEnforcedServer(kind), seed)), { timeout: 600_000, excludeTestServices: true })((it) => {
      it.effect("reads and searches keep to the token's patient, with includes, chains and totals", () =>
        Effect.gen(function*() {
          expect((yield* send("patientA", "GET", "Observation/oa-lab")).status).toBe(200)
          expect((yield* send("patientA", "GET", "Observation/ob-lab")).status).toBe(404)
          expect((yield* send("labsA", "GET", "Observation/oa-vital")).status).toBe(404)
          expect((yield* send("observationsA", "GET", "Condition/ca")).status).toBe(403)
          const search = yield* send("patientA", "GET", "Observation?_total=accurate")
          expect([matches(search), search.json.total]).toEqual([["Observation/oa-lab", "Observation/oa-vital"], 2])
          expect(matches(yield* send("patientA", "GET", "Observation?code=b-lab,a-lab"))).toEqual(["Observation/oa-lab"])
          expect(matches(yield* send("patientA", "GET", "Observation?derived-from:Observation.code=b-lab"))).toEqual([])
          const withIncludes = yield* send("patientA", "GET", "Observation?_id=oa-lab&_include=Observation:derived-from&_include=Observation:performer")
          expect(included(withIncludes)).toEqual(["Practitioner/dr"])
          const everything = yield* send("patientA", "GET", "Patient/pa/$everything?_count=100")
          expect(showsNothingOfB(everything)).toBe(true)
          expect(everything.json.total).toBe(6)
          expect((yield* send("patientA", "GET", "Patient/pb/Observation")).status).toBe(403)
        }))

      it.effect("writes outside the compartment are refused with nothing written", () =>
        Effect.gen(function*() {
          const refused = yield* send("writerA", "POST", "Observation", observation("x", "pb", laboratory, "servers-write"))
          expect([refused.status, refused.json.issue[0].code]).toEqual([403, "forbidden"])
          const transaction = yield* send("writerA", "POST", "", {
            resourceType: "Bundle",
            type: "transaction",
            entry: [
              { resource: observation("x", "pa", laboratory, "servers-write"), request: { method: "POST", url: "Observation" } },
              { resource: observation("ob-lab", "pa", laboratory, "servers-write"), request: { method: "PUT", url: "Observation/ob-lab" } }
            ]
          })
          expect(transaction.status).toBe(403)
          expect(matches(yield* send("anonymous", "GET", "Observation?code=servers-write"))).toEqual([])
          expect((yield* send("anonymous", "GET", "Observation/ob-lab")).json.subject.reference).toBe("Patient/pb")
          expect((yield* send("writerA", "POST", "Observation", observation("x", "pa", laboratory, "servers-write"))).status).toBe(201)
        }))

      it.effect("the fast path answers a whole grant and declines a restricted one, which the general path answers", () =>
        Effect.gen(function*() {
          const start = (yield* fastCounts)!
          // Restricted: declined, and answered right by the general path.
          expect((yield* send("patientA", "GET", "Observation/ob-lab")).status).toBe(404)
          expect(matches(yield* send("patientA", "GET", "Observation?code=b-lab"))).toEqual([])
          expect((yield* send("observationsA", "GET", "Observation/oa-lab")).status).toBe(200)
          expect((yield* send("labsA", "GET", "Observation?code=a-vital"))).toMatchObject({ status: 200 })
          expect(yield* fastCounts).toEqual(start)
          // Whole grants (system/*.rs, user/Observation.read): the fast path, with what anonymous gets.
          const read = yield* send("systemReader", "GET", "Observation/ob-lab")
          expect(read.text).toBe((yield* send("anonymous", "GET", "Observation/ob-lab")).text)
          expect(matches(yield* send("userObservations", "GET", "Observation?code=b-lab"))).toEqual(["Observation/ob-lab"])
          const after = (yield* fastCounts)!
          expect(after.reads - start.reads).toBe(2)
          expect(after.searches - start.searches).toBe(1)
          // A whole grant on the type, restricted elsewhere: a chain declines (it would reach restricted types).
          expect(matches(yield* send("userObservations", "GET", "Observation?subject:Patient.name=Bee"))).toEqual([])
          expect((yield* fastCounts)!.searches).toBe(after.searches)
        }))
    })
  })
}
