/**
 * The scope matrix, writing (docs/smart.md, "Scopes"): create, update, patch, delete, their conditional forms,
 * batch and transaction Bundles and `$validate`, for v1 and v2 patient scopes, a v2 query and user and
 * system scopes, against the in-memory store with the real R4 packages. A write outside what the token
 * allows is a 403 and leaves the store as it was; a condition never matches what the token cannot reach.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { skipRealPackages } from "../support/npmRegistry.ts"
import type { Reply, TestServer } from "../support/server.ts"
import { as, type Caller, laboratory, matches, observation, seed, showsNothingOfB, startEnforcedServer, vitalSigns } from "./enforcementSupport.ts"

class Server extends Context.Tag("test/EnforcementWriteServer")<Server, TestServer>() {}

const send = (caller: Caller, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  Effect.flatMap(Server, (server) => as(server, caller, method, path, { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) }))

const expectForbidden = (reply: Reply, text?: string) => {
  expect([reply.status, reply.json?.issue?.[0]?.code, reply.text.slice(0, 200)]).toEqual([403, "forbidden", reply.text.slice(0, 200)])
  if (text !== undefined) expect(reply.json.issue[0].diagnostics).toContain(text)
}

/** The ids of the Observations with `code`, as the server without tokens sees them. */
const withCode = (code: string) => Effect.map(send("anonymous", "GET", `Observation?code=${code}&_count=100`), (reply) => matches(reply))

/** A resource as the server without tokens reads it. */
const stored = (path: string) => Effect.map(send("anonymous", "GET", path), (reply) => reply.json)

/** Puts `resource` as the server without tokens (a resource of either patient for a test to work on). */
const put = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* send("anonymous", "PUT", `${String(resource["resourceType"])}/${String(resource["id"])}`, resource)
    expect([reply.status, reply.text.slice(0, 200)]).toEqual([201, reply.text.slice(0, 200)])
  })

describe.skipIf(skipRealPackages)("scope enforcement on writes, in memory", () => {
  layer(Layer.scoped(Server, Effect.tap(startEnforcedServer("memory"), seed)), { timeout: 600_000, excludeTestServices: true })((it) => {
    it.effect("create: only into the token's patient compartment; outside it a 403 and nothing written", () =>
      Effect.gen(function*() {
        for (const caller of ["writerA", "writerAv1"] as const) {
          const code = `create-${caller}`
          const inside = yield* send(caller, "POST", "Observation", observation("x", "pa", laboratory, code))
          expect([caller, inside.status]).toEqual([caller, 201])
          expectForbidden(yield* send(caller, "POST", "Observation", observation("x", "pb", laboratory, code)), "outside")
          expect(yield* withCode(code)).toEqual([`Observation/${inside.json.id}`])
          // A Patient other than its own, and a type that is in no patient's compartment, are not its to create.
          expectForbidden(yield* send(caller, "POST", "Patient", { resourceType: "Patient", name: [{ family: "New" }] }))
          expectForbidden(yield* send(caller, "POST", "Practitioner", { resourceType: "Practitioner" }), "user/Practitioner.c")
        }
        expectForbidden(yield* send("readerAv1", "POST", "Observation", observation("x", "pa", laboratory, "create-reader")), "patient/Observation.c")
        expectForbidden(yield* send("userObservations", "POST", "Observation", observation("x", "pa", laboratory, "create-user")), "user/Observation.c")
        expect(yield* withCode("create-reader")).toEqual([])
        // A v2 query: only what it matches may be created.
        expect((yield* send("labWriterA", "POST", "Observation", observation("x", "pa", laboratory, "create-lab"))).status).toBe(201)
        expectForbidden(yield* send("labWriterA", "POST", "Observation", observation("x", "pa", vitalSigns, "create-lab")))
        expectForbidden(yield* send("labWriterA", "POST", "Observation", observation("x", "pb", laboratory, "create-lab")))
        expect(yield* withCode("create-lab")).toHaveLength(1)
        // Unrestricted scopes write anywhere.
        expect((yield* send("systemAll", "POST", "Observation", observation("x", "pb", laboratory, "create-system"))).status).toBe(201)
      }))

    it.effect("update: the resource before and after must both be inside; a 403 leaves it as it was", () =>
      Effect.gen(function*() {
        yield* put(observation("upd-a", "pa", laboratory, "upd"))
        yield* put(observation("upd-b", "pb", laboratory, "upd"))
        // Moving A's resource to B.
        expectForbidden(yield* send("writerA", "PUT", "Observation/upd-a", observation("upd-a", "pb", laboratory, "upd")))
        expect((yield* stored("Observation/upd-a")).subject.reference).toBe("Patient/pa")
        // Taking B's resource.
        expectForbidden(yield* send("writerA", "PUT", "Observation/upd-b", observation("upd-b", "pa", laboratory, "upd")))
        expect((yield* stored("Observation/upd-b")).meta.versionId).toBe("1")
        // Within the record.
        const changed = yield* send("writerA", "PUT", "Observation/upd-a", observation("upd-a", "pa", vitalSigns, "upd"))
        expect(changed.status).toBe(200)
        // Update as create: the new resource must be inside, and creating needs `c`.
        expect((yield* send("writerA", "PUT", "Observation/upd-new-a", observation("upd-new-a", "pa", laboratory, "upd"))).status).toBe(201)
        expectForbidden(yield* send("writerA", "PUT", "Observation/upd-new-b", observation("upd-new-b", "pb", laboratory, "upd")))
        expect((yield* send("anonymous", "GET", "Observation/upd-new-b")).status).toBe(404)
        // The v2 query: a laboratory Observation may not be turned into vital signs.
        yield* put(observation("upd-lab", "pa", laboratory, "upd"))
        expectForbidden(yield* send("labWriterA", "PUT", "Observation/upd-lab", observation("upd-lab", "pa", laboratory, "upd")), "updating")
        expect((yield* send("systemAll", "PUT", "Observation/upd-b", observation("upd-b", "pa", laboratory, "upd"))).status).toBe(200)
      }))

    it.effect("patch and delete: only of resources inside, and a patch may not move one out", () =>
      Effect.gen(function*() {
        yield* put(observation("pd-a", "pa", laboratory, "pd"))
        yield* put(observation("pd-b", "pb", laboratory, "pd"))
        const moveOut = [{ op: "replace", path: "/subject/reference", value: "Patient/pb" }]
        const patchType = { "content-type": "application/json-patch+json" }
        expectForbidden(yield* send("writerA", "PATCH", "Observation/pd-a", moveOut, patchType))
        expect((yield* stored("Observation/pd-a")).subject.reference).toBe("Patient/pa")
        expectForbidden(yield* send("writerA", "PATCH", "Observation/pd-b", [{ op: "replace", path: "/status", value: "amended" }], patchType))
        expect((yield* stored("Observation/pd-b")).status).toBe("final")
        expect((yield* send("writerA", "PATCH", "Observation/pd-a", [{ op: "replace", path: "/status", value: "amended" }], patchType)).status).toBe(200)
        expectForbidden(yield* send("writerA", "DELETE", "Observation/pd-b"))
        expect((yield* send("anonymous", "GET", "Observation/pd-b")).status).toBe(200)
        expectForbidden(yield* send("patientA", "DELETE", "Observation/pd-a"), "patient/Observation.d")
        expect((yield* send("writerA", "DELETE", "Observation/pd-a")).status).toBe(204)
        expect((yield* send("anonymous", "GET", "Observation/pd-a")).status).toBe(410)
      }))

    it.effect("conditional create, update, patch and delete: a match outside the compartment is as if it did not exist", () =>
      Effect.gen(function*() {
        const identifier = (value: string) => ({ identifier: [{ system: "http://example.org/ids", value }] })
        yield* put(observation("cond-b", "pb", laboratory, "cond", identifier("cond-1")))
        const condition = "identifier=http://example.org/ids|cond-1"
        // If-None-Exist: B's match is not seen; A's resource is created, B's untouched.
        const created = yield* send("writerA", "POST", "Observation", observation("x", "pa", laboratory, "cond", identifier("cond-1")), { "if-none-exist": condition })
        expect(created.status).toBe(201)
        expect(created.json.subject.reference).toBe("Patient/pa")
        const again = yield* send("writerA", "POST", "Observation", observation("x", "pa", laboratory, "cond", identifier("cond-1")), { "if-none-exist": condition })
        expect([again.status, again.json.id]).toEqual([200, created.json.id])
        // Conditional update now matches A's own one only.
        const updated = yield* send("writerA", "PUT", `Observation?${condition}`, observation(created.json.id, "pa", vitalSigns, "cond", identifier("cond-1")))
        expect([updated.status, updated.json.id]).toEqual([200, created.json.id])
        // With nothing of A's matching, an update creates, but never outside the compartment.
        yield* put(observation("cond-b2", "pb", laboratory, "cond", identifier("cond-2")))
        const elsewhere = { ...observation("x", "pb", laboratory, "cond", identifier("cond-2")) } as Record<string, unknown>
        delete elsewhere["id"]
        expectForbidden(yield* send("writerA", "PUT", "Observation?identifier=http://example.org/ids|cond-2", elsewhere))
        const inside = { ...elsewhere, subject: { reference: "Patient/pa" } }
        const made = yield* send("writerA", "PUT", "Observation?identifier=http://example.org/ids|cond-2", inside)
        expect(made.status).toBe(201)
        expect(made.json.id).not.toBe("cond-b2")
        expect((yield* stored("Observation/cond-b2")).meta.versionId).toBe("1")
        // Conditional patch and delete do not reach B's.
        yield* put(observation("cond-b3", "pb", laboratory, "cond", identifier("cond-3")))
        const patch = yield* send("writerA", "PATCH", "Observation?identifier=http://example.org/ids|cond-3", [{ op: "replace", path: "/status", value: "amended" }], {
          "content-type": "application/json-patch+json"
        })
        expect(patch.status).toBe(404)
        expect((yield* send("writerA", "DELETE", "Observation?identifier=http://example.org/ids|cond-3")).status).toBe(204)
        expect((yield* stored("Observation/cond-b3")).status).toBe("final")
        // A token that may not write the type is refused before anything is matched.
        expectForbidden(yield* send("patientA", "DELETE", "Observation?identifier=http://example.org/ids|cond-3"), "Observation.d")
      }))

    it.effect("batch: each entry is checked as its own request, a refused one answers 403 in its entry", () =>
      Effect.gen(function*() {
        yield* put(observation("batch-b", "pb", laboratory, "batch"))
        const reply = yield* send("writerA", "POST", "", {
          resourceType: "Bundle",
          type: "batch",
          entry: [
            { resource: observation("x", "pa", laboratory, "batch-new"), request: { method: "POST", url: "Observation" } },
            { resource: observation("x", "pb", laboratory, "batch-new"), request: { method: "POST", url: "Observation" } },
            { request: { method: "GET", url: "Observation/ob-lab" } },
            { request: { method: "GET", url: "Observation/oa-lab" } },
            { request: { method: "GET", url: "Observation?code=b-lab,a-lab" } },
            { request: { method: "GET", url: "Patient/pb/Observation" } },
            { request: { method: "DELETE", url: "Observation/batch-b" } }
          ]
        })
        expect(reply.status).toBe(200)
        const statuses = reply.json.entry.map((entry: any) => entry.response.status.split(" ")[0])
        expect(statuses).toEqual(["201", "403", "404", "200", "200", "403", "403"])
        expect(showsNothingOfB(reply)).toBe(true)
        expect(reply.json.entry[4].resource.entry.map((e: any) => e.resource.id)).toEqual(["oa-lab"])
        expect(reply.json.entry[1].response.outcome.issue[0].code).toBe("forbidden")
        expect(yield* withCode("batch-new")).toHaveLength(1)
        expect((yield* send("anonymous", "GET", "Observation/batch-b")).status).toBe(200)
        const reader = yield* send("observationsA", "POST", "", {
          resourceType: "Bundle",
          type: "batch",
          entry: [{ request: { method: "GET", url: "Condition/ca" } }, { request: { method: "GET", url: "Observation?_count=10" } }]
        })
        expect(reader.json.entry.map((entry: any) => entry.response.status.split(" ")[0])).toEqual(["403", "200"])
      }))

    it.effect("transaction: one refused entry fails the whole with 403, and nothing is written", () =>
      Effect.gen(function*() {
        const entries = (patient: string) => [
          { resource: observation("x", "pa", laboratory, "tx"), request: { method: "POST", url: "Observation" } },
          { resource: { resourceType: "Condition", subject: { reference: `Patient/${patient}` }, code: { text: "tx" } }, request: { method: "POST", url: "Condition" } },
          { request: { method: "GET", url: "Observation?code=tx" } }
        ]
        const refused = yield* send("writerA", "POST", "", { resourceType: "Bundle", type: "transaction", entry: entries("pb") })
        expectForbidden(refused, "Bundle.entry[1]")
        expect(yield* withCode("tx")).toEqual([])
        const done = yield* send("writerA", "POST", "", { resourceType: "Bundle", type: "transaction", entry: entries("pa") })
        expect(done.status).toBe(200)
        expect(yield* withCode("tx")).toHaveLength(1)
        // A transaction that only reads B's resource by id.
        const read = yield* send("writerA", "POST", "", { resourceType: "Bundle", type: "transaction", entry: [{ request: { method: "GET", url: "Condition/cb" } }] })
        expect(read.status).toBe(404)
        // Writes under a token without write scopes.
        const reader = yield* send("readerAv1", "POST", "", { resourceType: "Bundle", type: "transaction", entry: entries("pa") })
        expectForbidden(reader, "patient/Observation.c")
        // A conditional reference finds only what the token may search: B's Patient is not found.
        const conditional = yield* send("writerA", "POST", "", {
          resourceType: "Bundle",
          type: "transaction",
          entry: [{ resource: { ...observation("x", "pa", laboratory, "tx-ref"), subject: { reference: "Patient?name=Bee" } }, request: { method: "POST", url: "Observation" } }]
        })
        expect(conditional.status).toBe(404)
        expect(yield* withCode("tx-ref")).toEqual([])
        const ownRef = yield* send("writerA", "POST", "", {
          resourceType: "Bundle",
          type: "transaction",
          entry: [{ resource: { ...observation("x", "pa", laboratory, "tx-ref"), subject: { reference: "Patient?name=Ayy" } }, request: { method: "POST", url: "Observation" } }]
        })
        expect(ownRef.status).toBe(200)
      }))

    it.effect("$validate is checked as the interaction its mode stands for", () =>
      Effect.gen(function*() {
        const body = observation("x", "pa", laboratory, "validate")
        expectForbidden(yield* send("patientA", "POST", "Observation/$validate", body), "Observation.c")
        expect((yield* send("writerA", "POST", "Observation/$validate", body)).status).toBe(200)
        expect((yield* send("patientA", "POST", "Observation/$validate?mode=profile", body)).status).toBe(200)
        expect((yield* send("writerA", "POST", "Observation/ob-lab/$validate?mode=delete")).status).toBe(404)
        expect((yield* send("writerA", "POST", "Observation/oa-lab/$validate?mode=delete")).status).toBe(200)
        expectForbidden(yield* send("auditOnly", "POST", "Observation/$validate", body))
      }))
  })
})
