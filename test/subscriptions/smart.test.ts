/**
 * Subscriptions under SMART scopes (callers resolved from a test header, as the front door resolves tokens):
 * creating one needs write permission on Subscription, and a Subscription is matched with the grant of the token
 * that wrote it, so its notifications carry only resources that token could read (another patient's, or a type
 * it may not read, are never notified).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { anonymous, type Authorized } from "../../src/http/Principal.ts"
import { backends } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { startReceiver } from "../support/receiver.ts"
import { call, startServer } from "../support/server.ts"
import { notified, observation, subscription } from "./support.ts"

const authorized = (scopes: string, patient?: string): Authorized => ({
  _tag: "Authorized",
  address: "127.0.0.1",
  clientId: "subscription-test",
  user: "someone",
  scopes: scopes.split(" "),
  patient
})

const principals: Record<string, Authorized> = {
  /** May create Subscriptions, and read patient A's Observations only. */
  subscriberA: authorized("user/Subscription.cruds patient/Observation.rs", "pa"),
  /** May read Observations but not write Subscriptions. */
  readerA: authorized("patient/Observation.rs", "pa"),
  /** May create Subscriptions, and read no Observation. */
  noObservations: authorized("user/Subscription.cruds patient/Patient.rs", "pa"),
  /** Writes everything. */
  system: authorized("system/*.cruds")
}

const header = "x-test-principal"
const resolution = Layer.succeed(PrincipalResolution, (headers, address) => {
  const name = headers[header]
  return typeof name === "string" && name in principals ? principals[name]! : anonymous(address)
})

for (const backend of backends.filter((b) => b.kind === "sqlite" || b.kind === "postgres")) {
  describe.skipIf(backend.skip || skipRealPackages)(`Subscriptions under SMART scopes on ${backend.kind}`, () => {
    it.scoped("need write permission on Subscription, and notify only what the writer's grant may read", () =>
      Effect.gen(function*() {
        const server = yield* startServer(backend.kind, {
          conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true }
        }).pipe(Effect.provide(resolution))
        const as = (who: string, method: string, path: string, body?: unknown) =>
          call(method, `${server.base}/${path}`, { ...(body === undefined ? {} : { body }), headers: { [header]: who } })
        const receiver = yield* startReceiver()
        const blind = yield* startReceiver()
        for (const id of ["pa", "pb"]) expect((yield* as("system", "PUT", `Patient/${id}`, { resourceType: "Patient", id })).status).toBe(201)

        const refused = yield* as("readerA", "POST", "Subscription", subscription("Observation?code=1010-1", { endpoint: receiver.url }))
        expect(refused.status).toBe(403)
        expect(refused.json.resourceType).toBe("OperationOutcome")

        const created = yield* as("subscriberA", "POST", "Subscription", subscription("Observation?code=1010-1", { endpoint: receiver.url }))
        expect(created.status, created.text).toBe(201)
        const blindCreated = yield* as("noObservations", "POST", "Subscription", subscription("Observation?code=1010-1", { endpoint: blind.url }))
        expect(blindCreated.status, blindCreated.text).toBe(201)
        yield* server.subscriptionsSettled

        const ofB = yield* as("system", "POST", "Observation", observation("1010-1", { subject: "Patient/pb" }))
        expect(ofB.status).toBe(201)
        const ofA = yield* as("system", "POST", "Observation", observation("1010-1", { subject: "Patient/pa" }))
        expect(ofA.status).toBe(201)
        // Deliveries are in order: the first to arrive is A's, so B's was never sent.
        const hit = yield* receiver.next
        expect(notified(hit.body).map((r) => r["id"])).toEqual([ofA.json.id])
        expect(hit.body).not.toContain(ofB.json.id as string)
        yield* server.subscriptionsSettled
        expect(blind.received).toHaveLength(0)
        expect(receiver.received).toHaveLength(1)
      }), 120_000)
  })
}
