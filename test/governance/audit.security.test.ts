/**
 * The authorization server's decisions in the audit trail (src/governance/audit/SecurityEvents.ts): the
 * AuditEvent of each decision (codes, agents, entities), the row it is kept as, and on SQLite and Postgres the
 * trail that appends them in its chain, limits the refusals of requestors who proved nothing, records nothing
 * with `audit.enabled` false, and never keeps a credential the request carried.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { Database } from "../../src/db/Database.ts"
import { GovernanceSettings, settingsOf } from "../../src/governance/Governance.ts"
import { AuditKey, make as makeTrail } from "../../src/governance/audit/AuditTrail.ts"
import { verify } from "../../src/governance/audit/chain.ts"
import { columnsOf, packEvent, unpackEvent } from "../../src/governance/audit/events.ts"
import { fromTrail, kindsOfType, none, type SecurityDecision, securityEvent } from "../../src/governance/audit/SecurityEvents.ts"
import { builtInClientId, type Client } from "../../src/auth/Clients.ts"
import { claimedClient, signInFailed, tokenIssued, tokenRefused } from "../../src/auth/decisions.ts"
import { refused as signInRefused, UpstreamUnavailable } from "../../src/auth/oidc/errors.ts"
import { Admission } from "../../src/http/FrontDoor.ts"
import { classify } from "../../src/http/Route.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const at = { timeMillis: Date.parse("2026-03-01T10:00:00Z"), address: "192.0.2.7", requestId: "req-42" }

const publicClient: Client = {
  clientId: "chart-app",
  metadata: { redirect_uris: ["http://127.0.0.1/cb"], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] },
  authMethods: ["none"],
  builtIn: false,
  createdAt: 0
}
const confidential: Client = { ...publicClient, clientId: builtInClientId, metadata: { ...publicClient.metadata, token_endpoint_auth_method: "client_secret_basic" }, authMethods: ["client_secret_basic"] }

const signIn: SecurityDecision = {
  kind: "sign-in",
  outcome: "success",
  known: true,
  client: "chart-app",
  user: "dr-who",
  fhirUser: "Practitioner/7",
  patient: "p1",
  details: { method: "demo" }
}

describe("the AuditEvent of an authorization server's decision", () => {
  it("records a sign-in as User Authentication / Login, by the user of the app, with the fhirUser and the patient", () => {
    const event = securityEvent(signIn, at)
    expect(event).toMatchObject({
      resourceType: "AuditEvent",
      type: { system: "http://dicom.nema.org/resources/ontology/DCM", code: "110114", display: "User Authentication" },
      subtype: [{ system: "http://dicom.nema.org/resources/ontology/DCM", code: "110122", display: "Login" }],
      action: "E",
      recorded: "2026-03-01T10:00:00.000Z",
      outcome: "0"
    })
    expect(event.outcomeDesc).toBeUndefined()
    expect(event.agent[0]).toMatchObject({
      who: { reference: "Practitioner/7", identifier: { value: "client:chart-app/user:dr-who" } },
      requestor: true,
      network: { address: "192.0.2.7", type: "2" }
    })
    expect(event.agent[1]).toMatchObject({ type: { coding: [{ code: "110150" }] }, who: { identifier: { value: "chart-app" } }, requestor: false })
    expect(event.entity![0]).toMatchObject({ what: { reference: "Patient/p1" }, type: { code: "1" }, role: { code: "1", display: "Patient" } })
    expect(event.entity!.find((entity) => entity.what?.identifier?.value === "/auth/login")!.detail).toEqual([{ type: "method", valueString: "demo" }])
    expect(event.entity!.at(-1)).toMatchObject({ what: { identifier: { value: "req-42" } }, type: { code: "XrequestId" } })
  })

  it("gives each decision its standard type and subtype, and C for what it creates", () => {
    const codes = (["sign-in", "consent", "token", "revocation", "registration", "launch"] as const).map((kind) => {
      const event = securityEvent({ kind, outcome: "success", known: true }, at)
      return [kind, event.type.code, event.subtype![0]!.system, event.subtype![0]!.code, event.action]
    })
    expect(codes).toEqual([
      ["sign-in", "110114", "http://dicom.nema.org/resources/ontology/DCM", "110122", "E"],
      ["consent", "110113", "https://profiles.ihe.net/ITI/BALP/CodeSystem/AuthZsubType", "AuthZ-Consent", "E"],
      ["token", "110114", "urn:ihe:event-type-code", "ITI-71", "E"],
      ["revocation", "110114", "http://dicom.nema.org/resources/ontology/DCM", "110123", "E"],
      ["registration", "110113", "http://dicom.nema.org/resources/ontology/DCM", "110129", "C"],
      ["launch", "110100", "http://dicom.nema.org/resources/ontology/DCM", "110120", "C"]
    ])
    expect(kindsOfType).toEqual({ "110114": ["110122", "ITI-71", "110123"], "110113": ["AuthZ-Consent", "110129"], "110100": ["110120"] })
  })

  it("records a token with its grant type and scopes; a refusal by a requestor who proved nothing under its address, with the reason", () => {
    const issued = securityEvent(tokenIssued(confidential, { clientId: builtInClientId, scopes: ["system/Patient.rs", "system/AuditEvent.read"] }, "client_credentials"), at)
    expect(issued.agent[0]!.who.identifier.value).toBe(`client:${builtInClientId}`)
    expect(issued.entity!.find((entity) => entity.detail !== undefined)!.detail).toEqual([
      { type: "scope", valueString: "system/Patient.rs system/AuditEvent.read" },
      { type: "grant_type", valueString: "client_credentials" }
    ])
    const refused = securityEvent({ kind: "token", outcome: "refused", known: false, client: builtInClientId, reason: "invalid_client: the client secret of svc-confidential is wrong" }, at)
    expect(refused.outcome).toBe("4")
    expect(refused.outcomeDesc).toBe("invalid_client: the client secret of svc-confidential is wrong")
    expect(refused.agent.map((agent) => agent.who.identifier.value)).toEqual(["address:192.0.2.7", builtInClientId])
    expect(securityEvent({ kind: "sign-in", outcome: "failed", known: false, reason: "the sign-in provider is unavailable" }, at).outcome).toBe("8")
  })

  it("names a registered client in a detail, not as the requestor", () => {
    const event = securityEvent({ kind: "registration", outcome: "success", known: true, client: "new-app", details: { token_endpoint_auth_method: "private_key_jwt" } }, at)
    expect(event.agent).toHaveLength(1)
    expect(event.agent[0]!.who.identifier.value).toBe("address:192.0.2.7")
    expect(event.entity![0]!.detail).toEqual([{ type: "client_id", valueString: "new-app" }, { type: "token_endpoint_auth_method", valueString: "private_key_jwt" }])
  })

  it("keeps text from outside to a bounded length", () => {
    const event = securityEvent({ kind: "token", outcome: "refused", known: false, reason: "x".repeat(10_000), details: { grant_type: "g".repeat(10_000) } }, at)
    expect(event.outcomeDesc!.length).toBeLessThanOrEqual(501)
    expect(JSON.stringify(event).length).toBeLessThan(3000)
  })

  it("is kept as a row that gives back the very event, with the columns /_audit filters on", () => {
    for (const event of [securityEvent(signIn, at), securityEvent({ kind: "launch", outcome: "success", known: true, patient: "p9", encounter: "e1" }, { ...at, requestId: undefined })]) {
      const back = unpackEvent(packEvent(event))
      expect(back).toEqual(event)
      expect(JSON.stringify(back)).toBe(JSON.stringify(event))
    }
    expect(columnsOf(securityEvent(signIn, at))).toEqual({
      time: at.timeMillis,
      kind: "110122",
      action: "E",
      outcome: "0",
      agent: "client:chart-app/user:dr-who",
      client: "192.0.2.7",
      entity: "Patient/p1"
    })
  })
})

describe("the credentials of a request, as the decisions are made from it", () => {
  it("names the client a request claims, never its secret or assertion", () => {
    const secret = "s3cret-of-the-client"
    const basic = { authorization: `Basic ${Buffer.from(`${builtInClientId}:${secret}`).toString("base64")}` }
    expect(claimedClient(basic, new URLSearchParams({ grant_type: "client_credentials" }))).toBe(builtInClientId)
    expect(claimedClient({}, new URLSearchParams({ client_id: "chart-app", client_secret: secret }))).toBe("chart-app")
    expect(claimedClient({}, new URLSearchParams({ client_assertion: "not-a-jwt" }))).toBeUndefined()
    const refused = tokenRefused(publicClient, "authorization_code", "invalid_grant", "the code is unknown, expired, already used or not this client's", null)
    expect(refused).toMatchObject({ known: false, client: "chart-app", reason: "invalid_grant: the code is unknown, expired, already used or not this client's" })
  })

  it("says why an upstream sign-in was refused as the user was told, never the provider's detail", () => {
    const refusal = signInFailed("chart-app", signInRefused("not_allowed", "email dr@elsewhere.example is not in smart.oidc.allowed_email_domains"))
    expect(refusal).toMatchObject({ kind: "sign-in", outcome: "refused", known: false, client: "chart-app", reason: "not_allowed: your account is not allowed to sign in here" })
    const unavailable = signInFailed("chart-app", new UpstreamUnavailable({ issuer: "https://idp.example.org", reason: "connect ECONNREFUSED 10.0.0.1:443" }))
    expect(unavailable).toMatchObject({ outcome: "failed", reason: "the sign-in provider is unavailable" })
    expect(securityEvent(unavailable, at).outcome).toBe("8")
  })
})

const settings = (audit: Partial<AppConfig["audit"]> = {}) => {
  const config = Schema.decodeUnknownSync(AppConfig)({})
  return settingsOf({ ...config, audit: { ...config.audit, ...audit } })
}

const trailLayer = (audit: Partial<AppConfig["audit"]> = {}) => Layer.mergeAll(Layer.succeed(GovernanceSettings, settings(audit)), Layer.succeed(AuditKey, undefined))

const rows = Effect.flatMap(Database, (db) => db.writer<{ kind: string; outcome: string; agent: string; event: string }>`SELECT kind, outcome, agent, event FROM svc_audit ORDER BY seq`)

/** The admission of a request, as the front door gives it to the Effect side. */
const admission = (requestId: string): Admission => ({
  route: classify("POST", "/auth/token"),
  principal: { _tag: "Anonymous", address: "198.51.100.3" },
  requestId,
  client: "198.51.100.3",
  method: "POST",
  url: "/auth/token",
  startedNanos: 0n,
  bytesIn: undefined,
  status: undefined,
  bytesOut: undefined,
  inEdge: true,
  closed: false,
  completed: false
})

describe.each(backends)("the trail of the authorization server's decisions on $kind", ({ kind, skip }) => {
  it.scoped.skipIf(skip)("appends them in the chain with the request's address and id, and keeps no credential of the request", () =>
    withStore(kind, Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-03-01T10:00:00Z"))
      const trail = yield* makeTrail
      const events = fromTrail(trail)
      // What a token request carried: none of it may reach a row.
      const secrets = ["client-secret-9f8e7d6c5b4a", "authorization-code-0a1b2c3d4e", "refresh-token-5f6a7b8c9d", "verifier-1234567890abcdef"]
      const form = new URLSearchParams({ grant_type: "authorization_code", code: secrets[1]!, code_verifier: secrets[3]!, refresh_token: secrets[2]!, scope: "openid patient/*.rs" })
      const headers = { authorization: `Basic ${Buffer.from(`${builtInClientId}:${secrets[0]}`).toString("base64")}`, cookie: "svc_authz=cookie-value-77" }
      yield* events.record({ kind: "token", outcome: "refused", known: false, client: claimedClient(headers, form), reason: "invalid_client: the client secret of svc-confidential is wrong" }).pipe(
        Effect.provideService(Admission, admission("req-1"))
      )
      yield* events.record(tokenRefused(confidential, form.get("grant_type"), "invalid_grant", "the code is unknown, expired, already used or not this client's", form.get("scope"))).pipe(
        Effect.provideService(Admission, admission("req-2"))
      )
      yield* events.record(tokenIssued(confidential, { clientId: builtInClientId, scopes: ["openid", "patient/*.rs"], subject: "dr-who", patient: "p1" }, "authorization_code"))
      yield* trail.flush
      const written = yield* rows
      expect(written.map((row) => [row.kind, row.outcome, row.agent])).toEqual([
        ["ITI-71", "4", "address:198.51.100.3"],
        ["ITI-71", "4", `client:${builtInClientId}`],
        ["ITI-71", "0", `client:${builtInClientId}/user:dr-who`]
      ])
      const first = unpackEvent(written[0]!.event)
      expect(first.agent[0]!.network).toEqual({ address: "198.51.100.3", type: "2" })
      expect(first.entity!.at(-1)!.what!.identifier!.value).toBe("req-1")
      const text = written.map((row) => row.event).join("\n")
      for (const secret of [...secrets, "cookie-value-77"]) expect(text).not.toContain(secret)
      expect((yield* Effect.flatMap(Database, (db) => verify(db.writer, undefined))).ok).toBe(true)
    }).pipe(Effect.provide(trailLayer()))))

  it.scoped.skipIf(skip)("limits refusals by requestors who proved nothing to unattributed_per_second, never the others", () =>
    withStore(kind, Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-03-01T10:00:00Z"))
      const trail = yield* makeTrail
      const events = fromTrail(trail)
      for (let i = 0; i < 10; i++) yield* events.record({ kind: "registration", outcome: "refused", known: false, reason: "invalid_token: a wrong registration token" })
      for (let i = 0; i < 4; i++) yield* events.record(tokenRefused(confidential, "client_credentials", "invalid_scope", "a backend client may ask only for system/ scopes", "patient/*.rs"))
      yield* events.record({ kind: "registration", outcome: "success", known: true, client: "new-app" })
      yield* TestClock.adjust("1 second")
      yield* Effect.yieldNow()
      yield* trail.flush
      const kinds = (yield* rows).map((row) => `${row.kind}/${row.outcome}`)
      expect(kinds.filter((k) => k === "110129/4")).toHaveLength(3)
      expect(kinds.filter((k) => k === "ITI-71/4")).toHaveLength(4)
      expect(kinds.filter((k) => k === "110129/0")).toHaveLength(1)
      const sampled = (yield* rows).filter((row) => row.kind === "sampled")
      expect(sampled.map((row) => unpackEvent(row.event).outcomeDesc)).toEqual([
        "sampled: 7 more refusals with no known caller in this second, not recorded one by one (audit.unattributed_per_second)"
      ])
    }).pipe(Effect.provide(trailLayer({ unattributed_per_second: 3 })))))

  it.scoped.skipIf(skip)("records nothing, and does nothing, with audit.enabled false", () =>
    withStore(kind, Effect.gen(function*() {
      const trail = yield* makeTrail
      const events = fromTrail(trail)
      expect(events).toBe(none)
      yield* events.record(signIn)
      expect(trail.waiting()).toBe(0)
      expect(yield* rows).toEqual([])
    }).pipe(Effect.provide(trailLayer({ enabled: false })))))
})
