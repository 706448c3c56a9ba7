/**
 * Sign-in through an upstream OpenID provider (src/auth/oidc/): a real provider (test/support/oidcProvider.ts)
 * on loopback, its sign-in and consent pages filled in over HTTP, and what the signed-in user, or the refusal,
 * looks like to the caller: binding by fhirUser claim or by identifier lookup, the patient from a Patient
 * fhirUser, the e-mail domain and claim allowlists, a wrong state, a cancelled sign-in, an unreachable or
 * silent provider, and no secret in the log.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Logger, Option, Redacted, Schema, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { OidcSection } from "../../src/config/AppConfig.ts"
import { SignInRefused, UpstreamUnavailable } from "../../src/auth/oidc/errors.ts"
import { allowlistProblem, readFhirUser } from "../../src/auth/oidc/policy.ts"
import {
  callbackUrlFor,
  make,
  pendingIdFromState,
  SignInTransaction,
  type Upstream,
  type UpstreamOptions
} from "../../src/auth/oidc/Upstream.ts"
import { closedPort } from "../packages/support.ts"
import { silentServer } from "../support/silentServer.ts"
import { startOidcProvider, type TestProvider } from "../support/oidcProvider.ts"

const callbackUrl = callbackUrlFor("http://127.0.0.1:8080/")
const system = "urn:example:staff-id"

const accounts = {
  alice: {
    name: "Alice Adams",
    email: "alice@example.org",
    email_verified: true,
    fhirUser: "Practitioner/pr-alice",
    groups: ["clinicians", "staff"],
    role: "doctor"
  },
  bob: { given_name: "Bob", family_name: "Brown", email: "bob@EXAMPLE.org", email_verified: true, groups: ["staff"] },
  pat: { name: "Pat Patient", email: "pat@example.org", fhirUser: "http://127.0.0.1:8080/fhir/Patient/pt-1" },
  carol: { name: "Carol", email: "carol@other.org", email_verified: true, groups: ["clinicians"], role: "nurse" },
  dave: { name: "Dave", email: "dave@example.org", email_verified: false, groups: ["clinicians"], role: "doctor" },
  eve: { name: "Eve", email: "eve@example.org", fhirUser: "Observation/1" }
}

interface Setup {
  readonly provider: TestProvider
  readonly upstream: Upstream
  readonly lookups: ReadonlyArray<string>
}

/** A provider with the accounts above, and an upstream on it with these settings (scopes add `email`). */
const setup = (settings: Record<string, unknown> = {}, lookupTable: Record<string, ReadonlyArray<string>> = {}) =>
  Effect.gen(function*() {
    const provider = yield* startOidcProvider({ callbackUrl, accounts })
    const lookups: Array<string> = []
    const options: UpstreamOptions<never> = {
      settings: Schema.decodeUnknownSync(OidcSection)({
        issuer: provider.issuer,
        client_id: provider.clientId,
        scopes: ["openid", "profile", "email"],
        ...settings
      }),
      clientSecret: Redacted.make(provider.clientSecret),
      callbackUrl,
      lookup: (type, system, value) =>
        Effect.sync(() => {
          lookups.push(`${type}?identifier=${system}|${value}`)
          return lookupTable[value] ?? []
        })
    }
    const upstream = yield* make(options)
    const result: Setup = { provider, upstream, lookups }
    return result
  })

const signIn = ({ provider, upstream }: Setup, account: string, pendingId = "pending-1") =>
  Effect.gen(function*() {
    const { transaction, url } = yield* upstream.begin(pendingId)
    const callback = yield* provider.signIn(url, account)
    return yield* upstream.complete(callback, transaction)
  })

const refusal = (s: Setup, account: string) =>
  Effect.flip(signIn(s, account)).pipe(
    Effect.map((error) => {
      if (!(error instanceof SignInRefused)) throw new Error(`expected a refusal, got ${String(error)}`)
      return { reason: error.reason, message: error.message, detail: error.detail }
    })
  )

/** Runs `effect` with its log lines (message and annotations, as JSON) collected instead of printed. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => void lines.push(JSON.stringify(message)))
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return [result, lines] as const
  })

const notAllowed = "your account is not allowed to sign in here"

describe("OIDC sign-in", () => {
  it.scopedLive("a user with a fhirUser claim signs in and is bound to it; name and e-mail come from userinfo", () =>
    Effect.gen(function*() {
      const s = yield* setup({ fhir_user_lookup: { system } })
      const user = yield* signIn(s, "alice")
      expect(user).toEqual({
        subject: `${s.provider.issuer}|alice`,
        fhirUser: "Practitioner/pr-alice",
        patient: undefined,
        name: "Alice Adams",
        email: "alice@example.org",
        authTime: expect.any(Number)
      })
      // The claim wins: no lookup is made.
      expect(s.lookups).toEqual([])
    }))

  it.scopedLive("the authorization URL asks for the code flow with PKCE S256, a fresh state carrying the pending id, and a nonce", () =>
    Effect.gen(function*() {
      const s = yield* setup({ scopes: ["profile", "email"] })
      const first = yield* s.upstream.begin("pending.with.dots")
      const second = yield* s.upstream.begin("pending.with.dots")
      const url = new URL(first.url)
      expect(`${url.origin}${url.pathname}`).toBe(`${s.provider.issuer}/auth`)
      expect(Object.fromEntries([...url.searchParams].filter(([name]) => !["state", "nonce", "code_challenge"].includes(name)))).toEqual({
        client_id: s.provider.clientId,
        response_type: "code",
        redirect_uri: callbackUrl,
        scope: "openid profile email",
        code_challenge_method: "S256"
      })
      expect(url.searchParams.get("state")).toBe(first.transaction.state)
      expect(url.searchParams.get("nonce")).toBe(first.transaction.nonce)
      expect(url.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(pendingIdFromState(first.transaction.state)).toBe("pending.with.dots")
      expect(second.transaction.state).not.toBe(first.transaction.state)
      expect(second.transaction.nonce).not.toBe(first.transaction.nonce)
      expect(second.transaction.codeVerifier).not.toBe(first.transaction.codeVerifier)
      // The transaction survives a JSON round trip (the caller stores it so).
      expect(Schema.decodeUnknownSync(SignInTransaction)(JSON.parse(JSON.stringify(first.transaction)))).toEqual(first.transaction)
      // Discovered once for both.
      expect(s.provider.discoveries()).toBe(1)
    }))

  it.scopedLive("a user without a fhirUser claim is bound by the identifier lookup when exactly one resource matches", () =>
    Effect.gen(function*() {
      const s = yield* setup({ fhir_user_lookup: { system } }, { bob: ["pr-bob"] })
      const user = yield* signIn(s, "bob")
      expect(user).toMatchObject({ subject: `${s.provider.issuer}|bob`, fhirUser: "Practitioner/pr-bob", name: "Bob Brown" })
      expect(s.lookups).toEqual([`Practitioner?identifier=${system}|bob`])
    }))

  it.scopedLive("the lookup searches the configured type by the configured claim", () =>
    Effect.gen(function*() {
      const s = yield* setup({ fhir_user_lookup: { resource_type: "Person", claim: "email", system: "urn:example:email" } }, {
        "bob@EXAMPLE.org": ["person-7"]
      })
      expect((yield* signIn(s, "bob")).fhirUser).toBe("Person/person-7")
      expect(s.lookups).toEqual(["Person?identifier=urn:example:email|bob@EXAMPLE.org"])
    }))

  it.scopedLive("no lookup match signs the user in without fhirUser; two matches refuse the sign-in as ambiguous", () =>
    Effect.gen(function*() {
      const none = yield* setup({ fhir_user_lookup: { system } }, { bob: [] })
      const user = yield* signIn(none, "bob")
      expect(user.subject).toBe(`${none.provider.issuer}|bob`)
      expect(user.fhirUser).toBeUndefined()
      const two = yield* setup({ fhir_user_lookup: { system } }, { bob: ["pr-1", "pr-2"] })
      expect(yield* refusal(two, "bob")).toEqual({
        reason: "unbound",
        message: "your account could not be linked to a single person on this server",
        detail: `2 Practitioner resources have identifier ${system}|bob: pr-1, pr-2`
      })
    }))

  it.scopedLive("without a lookup, a user without a fhirUser claim signs in unbound", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const user = yield* signIn(s, "bob")
      expect(user.fhirUser).toBeUndefined()
      expect(s.lookups).toEqual([])
    }))

  it.scopedLive("patient_from_fhir_user gives the patient of a Patient fhirUser (an absolute URL, kept relative)", () =>
    Effect.gen(function*() {
      const on = yield* setup({ patient_from_fhir_user: true })
      expect(yield* signIn(on, "pat")).toMatchObject({ fhirUser: "Patient/pt-1", patient: "pt-1" })
      // A Practitioner is no patient.
      expect((yield* signIn(on, "alice")).patient).toBeUndefined()
      const off = yield* setup()
      expect(yield* signIn(off, "pat")).toMatchObject({ fhirUser: "Patient/pt-1", patient: undefined })
    }))

  it.scopedLive("a fhirUser claim that names no user resource refuses the sign-in", () =>
    Effect.gen(function*() {
      const s = yield* setup({ fhir_user_lookup: { system } }, { eve: ["pr-eve"] })
      const refused = yield* refusal(s, "eve")
      expect(refused.reason).toBe("unbound")
      expect(refused.detail).toMatch(/^the fhirUser claim Observation\/1 is not a reference to a Patient, Practitioner/)
      expect(s.lookups).toEqual([])
    }))

  it.scopedLive("allowed_email_domains admits example.org (any case) and refuses other.org and an unverified e-mail", () =>
    Effect.gen(function*() {
      const s = yield* setup({ allowed_email_domains: ["Example.org"] })
      expect((yield* signIn(s, "alice")).email).toBe("alice@example.org")
      expect((yield* signIn(s, "bob")).email).toBe("bob@EXAMPLE.org")
      // Without email_verified at all: admitted.
      expect((yield* signIn(s, "pat")).email).toBe("pat@example.org")
      expect(yield* refusal(s, "carol")).toEqual({
        reason: "not_allowed",
        message: notAllowed,
        detail: "e-mail domain other.org is not one of [Example.org]"
      })
      expect(yield* refusal(s, "dave")).toEqual({
        reason: "not_allowed",
        message: notAllowed,
        detail: "e-mail dave@example.org is not verified (email_verified is false)"
      })
    }))

  it.scopedLive("allowed_claims admits a user only when every configured claim holds a listed value", () =>
    Effect.gen(function*() {
      const s = yield* setup({ allowed_claims: { groups: ["clinicians", "admins"], role: ["doctor"] } })
      // groups is a list holding clinicians, role is doctor.
      expect((yield* signIn(s, "alice")).subject).toBe(`${s.provider.issuer}|alice`)
      expect(yield* refusal(s, "carol")).toEqual({
        reason: "not_allowed",
        message: notAllowed,
        detail: "claim role is [nurse]; one of [doctor] is required"
      })
      expect((yield* refusal(s, "bob")).detail).toBe("claim groups is [staff]; one of [clinicians, admins] is required")
      expect((yield* refusal(s, "pat")).detail).toBe("claim groups is missing; one of [clinicians, admins] is required")
    }))

  it.scopedLive("a callback checked against another sign-in's state is refused, and the code stays unspent", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const mine = yield* s.upstream.begin("pending-1")
      const other = yield* s.upstream.begin("pending-2")
      const callback = yield* s.provider.signIn(mine.url, "alice")
      const error = yield* Effect.flip(s.upstream.complete(callback, other.transaction))
      expect(error).toBeInstanceOf(SignInRefused)
      expect(error).toMatchObject({
        reason: "invalid_response",
        message: "the sign-in could not be completed; start again from the application"
      })
      expect((error as SignInRefused).detail).toMatch(/state/)
      // The state check comes before the exchange: the right transaction still completes.
      expect((yield* s.upstream.complete(callback, mine.transaction)).fhirUser).toBe("Practitioner/pr-alice")
      // A code is redeemed once.
      const again = yield* Effect.flip(s.upstream.complete(callback, mine.transaction))
      expect(again).toMatchObject({ reason: "invalid_response" })
      expect((again as SignInRefused).detail).toMatch(/invalid_grant/)
    }))

  it.scopedLive("a sign-in cancelled at the provider is refused with the provider's error", () =>
    Effect.gen(function*() {
      const s = yield* setup()
      const { transaction, url } = yield* s.upstream.begin("pending-1")
      const callback = yield* s.provider.cancel(url)
      expect(callback.searchParams.get("error")).toBe("access_denied")
      const error = yield* Effect.flip(s.upstream.complete(callback, transaction))
      expect(error).toMatchObject({
        reason: "provider_error",
        message: "the sign-in was not completed at the sign-in provider",
        detail: "the provider ended the sign-in with access_denied: End-User aborted interaction"
      })
    }))

  it.scopedLive("no secret reaches the log: client secret, code, PKCE verifier, tokens", () =>
    Effect.gen(function*() {
      const s = yield* setup({ allowed_email_domains: ["example.org"] })
      const [seen, lines] = yield* logged(Effect.gen(function*() {
        const ok = yield* s.upstream.begin("pending-1")
        const okCallback = yield* s.provider.signIn(ok.url, "alice")
        yield* s.upstream.complete(okCallback, ok.transaction)
        const no = yield* s.upstream.begin("pending-2")
        const noCallback = yield* s.provider.signIn(no.url, "carol")
        yield* Effect.flip(s.upstream.complete(noCallback, no.transaction))
        return [okCallback.searchParams.get("code")!, noCallback.searchParams.get("code")!, ok.transaction.codeVerifier, no.transaction.codeVerifier]
      }))
      expect(lines.some((line) => line.includes("sign-in refused") && line.includes("other.org"))).toBe(true)
      expect(lines.some((line) => line.includes("signed in through the provider"))).toBe(true)
      for (const secret of [s.provider.clientSecret, ...seen]) {
        expect(lines.filter((line) => line.includes(secret))).toEqual([])
      }
      // No JWT (an id_token or access token) either.
      expect(lines.filter((line) => /eyJ[A-Za-z0-9_-]+\./.test(line))).toEqual([])
    }))

  it.scopedLive("an unreachable issuer: the upstream is made, and each sign-in fails with an error naming the provider", () =>
    Effect.gen(function*() {
      const port = yield* closedPort
      const issuer = `http://127.0.0.1:${port}`
      const upstream = yield* make({
        settings: Schema.decodeUnknownSync(OidcSection)({ issuer, client_id: "svc" }),
        clientSecret: undefined,
        callbackUrl
      })
      const [error, lines] = yield* logged(Effect.flip(upstream.begin("pending-1")))
      expect(error).toBeInstanceOf(UpstreamUnavailable)
      expect(error.message).toBe(`the sign-in provider ${issuer} is unavailable: connection refused`)
      expect(lines.some((line) => line.includes("sign-in provider unavailable"))).toBe(true)
      // Not kept: the next attempt asks again, and fails the same way.
      expect((yield* Effect.flip(upstream.ready)).message).toBe(error.message)
    }))

  it.scopedLive("a loopback provider may not send the server to an http endpoint on another host", () =>
    Effect.gen(function*() {
      // A discovery document on loopback whose token endpoint is plain http elsewhere.
      const server = Http.createServer((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({
          issuer,
          authorization_endpoint: `${issuer}/auth`,
          token_endpoint: "http://login.invalid/token",
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["RS256"]
        }))
      })
      const port = yield* Effect.acquireRelease(
        Effect.async<number>((resume) => {
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
        }),
        () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const issuer = `http://127.0.0.1:${port}`
      const upstream = yield* make({
        settings: Schema.decodeUnknownSync(OidcSection)({ issuer, client_id: "svc" }),
        clientSecret: undefined,
        callbackUrl,
        timeout: "2 seconds"
      })
      const { transaction } = yield* upstream.begin("pending-1")
      const callback = new URL(`${callbackUrl}?code=a-code&state=${encodeURIComponent(transaction.state)}`)
      const error = yield* Effect.flip(upstream.complete(callback, transaction))
      expect(error.message).toBe(
        `the sign-in provider ${issuer} is unavailable: the provider named an http endpoint off this machine (http://login.invalid)`
      )
    }))

  it.scoped("a provider that never answers: the sign-in fails when the timeout passes on the Clock", () =>
    Effect.gen(function*() {
      const silent = yield* silentServer
      const issuer = `http://127.0.0.1:${silent.port}`
      const upstream = yield* make({
        settings: Schema.decodeUnknownSync(OidcSection)({ issuer, client_id: "svc" }),
        clientSecret: undefined,
        callbackUrl,
        timeout: "2 seconds"
      })
      const beginning = yield* Effect.fork(upstream.begin("pending-1"))
      yield* Deferred.await(silent.accepted)
      yield* TestClock.adjust("1999 millis")
      expect(Option.isNone(yield* Fiber.poll(beginning))).toBe(true)
      yield* TestClock.adjust("1 millis")
      const error = yield* Effect.flip(Fiber.join(beginning))
      expect(error.message).toBe(`the sign-in provider ${issuer} is unavailable: no answer within 2s`)
    }))

  it.effect("settings that cannot work are configuration errors: http off loopback, a lookup without system or of a non-user type", () =>
    Effect.gen(function*() {
      const attempt = (settings: Record<string, unknown>) =>
        Effect.flip(make({
          settings: Schema.decodeUnknownSync(OidcSection)(
            Object.fromEntries(
              Object.entries({ client_id: "svc", issuer: "https://login.example.org", ...settings }).filter(([, v]) => v !== undefined)
            )
          ),
          clientSecret: undefined,
          callbackUrl,
          lookup: () => Effect.succeed([])
        })).pipe(Effect.map((e) => e.message))
      expect(yield* attempt({ issuer: "http://login.example.org" })).toBe(
        "smart.oidc.issuer: expected an https URL (http is allowed only for a provider on 127.0.0.1, [::1] or localhost), got http://login.example.org"
      )
      expect(yield* attempt({ fhir_user_lookup: {} })).toMatch(/^smart\.oidc\.fhir_user_lookup\.system is required/)
      expect(yield* attempt({ fhir_user_lookup: { resource_type: "Organization", system } })).toMatch(
        /^smart\.oidc\.fhir_user_lookup\.resource_type: expected one of Patient, Practitioner/
      )
      expect(yield* attempt({ issuer: undefined })).toMatch(/^smart\.oidc\.issuer is required/)
      expect(yield* attempt({ client_id: undefined })).toMatch(/^smart\.oidc\.client_id is required/)
    }))
})

describe("OIDC allowlist and fhirUser rules", () => {
  it("reads fhirUser as a user resource reference, relative or at the end of an absolute URL", () => {
    expect(readFhirUser("Practitioner/123")).toEqual({ _tag: "Reference", reference: "Practitioner/123" })
    expect(readFhirUser("RelatedPerson/rp-1")).toEqual({ _tag: "Reference", reference: "RelatedPerson/rp-1" })
    expect(readFhirUser("Person/a.b")).toEqual({ _tag: "Reference", reference: "Person/a.b" })
    expect(readFhirUser("https://ehr.example.org/fhir/Patient/1")).toEqual({ _tag: "Reference", reference: "Patient/1" })
    for (const bad of ["Observation/1", "Patient", "Patient/", "Patient/1/_history/2", "/Patient/1", "urn:uuid:1234", "ftp://x/Patient/1", "https://x/Patient/1?x=1", "Patient/a_b"]) {
      expect(readFhirUser(bad)._tag, bad).toBe("Malformed")
    }
    expect(readFhirUser(["Patient/1"])).toEqual({ _tag: "Malformed", problem: "the fhirUser claim is a list, not a string" })
  })

  it("an empty list admits nobody; an unset allowlist admits everybody", () => {
    expect(allowlistProblem({ email: "a@example.org" }, {})).toBeUndefined()
    expect(allowlistProblem({ email: "a@example.org" }, { allowedEmailDomains: [] })).toBe("e-mail domain example.org is not one of []")
    expect(allowlistProblem({ groups: ["x"] }, { allowedClaims: { groups: [] } })).toBe("claim groups is [x]; one of [] is required")
    expect(allowlistProblem({ email: "a@sub.example.org" }, { allowedEmailDomains: ["example.org"] })).toBe(
      "e-mail domain sub.example.org is not one of [example.org]"
    )
    expect(allowlistProblem({ email: "a@example.org", email_verified: "false" }, { allowedEmailDomains: ["example.org"] })).toMatch(/not verified/)
    expect(allowlistProblem({ level: 3 }, { allowedClaims: { level: ["3"] } })).toBeUndefined()
  })
})
