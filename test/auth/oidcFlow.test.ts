/**
 * Signing in to a SMART app through the organisation's OpenID provider, end to end (SMART App Launch 2.2
 * standalone launch; OpenID Connect Core 1.0, 3.1; docs/smart-oidc.md): a real provider on loopback
 * (test/support/oidcProvider.ts), the real server with `smart.oidc` set and the demo login off, an app
 * written with `fhirclient` (test/support/smartApp.ts), and headless Chromium doing what the user does:
 * the app sends it to svc's sign-in page, "Sign in with your organisation" sends it to the provider, the
 * user signs in and consents on the provider's own pages, the provider sends the browser back to svc's
 * callback, and svc's picker and consent lead to the app's tokens.
 *
 * One server and one provider per backend. Every setting is on at once (the fhirUser lookup, the patient
 * from a Patient fhirUser, and both allowlist rules), so every admitted account is at example.org with an
 * allowed role, and each refused account breaks exactly one rule, which the server log names. The full set
 * runs on SQLite; on Postgres, the lookup (a search of the store) runs.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import { createRemoteJWKSet, jwtVerify } from "jose"
import type { Browser, Page } from "puppeteer-core"
import { callbackUrlFor } from "../../src/auth/oidc/Upstream.ts"
import { refusalMessages } from "../../src/auth/oidc/errors.ts"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { closedPort } from "../packages/support.ts"
import { pgAvailable } from "../support/backends.ts"
import { browserAvailable, launchBrowser } from "../support/browser.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { startOidcProvider, type TestProvider } from "../support/oidcProvider.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { type SmartApp, startSmartApp } from "../support/smartApp.ts"

const dcrToken = "test-dcr-token-0123456789abcdef"
const confidentialSecret = "test-confidential-secret-0123456789"
const staffSystem = "urn:example:staff"

/** The provider's accounts (the key is `sub`); the comment says what svc should make of each. */
const accounts = {
  // Bound by its fhirUser claim.
  ada: { name: "Ada Adams", email: "ada@example.org", email_verified: true, role: "clinician", fhirUser: "Practitioner/pr-ada" },
  // No fhirUser claim: bound by the Practitioner whose identifier is urn:example:staff|staff-1042.
  "staff-1042": { name: "Grace Green", email: "grace@example.org", email_verified: true, role: "clinician" },
  // A patient: gets Patient/pt-pat as launch context.
  pat: { name: "Pat Palmer", email: "pat@example.org", email_verified: true, role: "patient", fhirUser: "Patient/pt-pat" },
  // Refused by the e-mail domain only.
  cy: { name: "Cy Carter", email: "cy@other.org", email_verified: true, role: "clinician", fhirUser: "Practitioner/pr-cy" },
  // Refused by the role only.
  nia: { name: "Nia Nash", email: "nia@example.org", email_verified: true, role: "nurse", fhirUser: "Practitioner/pr-nia" }
}

interface Fixture {
  readonly server: TestServer
  readonly provider: TestProvider
  readonly browser: Browser
  /** Ids the server gave: the Practitioner found by the lookup, and a patient for the picker. */
  readonly ids: { readonly grace: string; readonly bob: string }
}

class Setup extends Context.Tag("test/OidcFlowSetup")<Setup, Fixture>() {}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** The store's content, written with the built-in confidential client's system token. */
const seed = (server: TestServer) =>
  Effect.gen(function*() {
    const token = yield* call("POST", `${server.url}/auth/token`, {
      body: new URLSearchParams({ grant_type: "client_credentials", scope: "system/*.cruds" }).toString(),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`svc-confidential:${confidentialSecret}`).toString("base64")}`
      }
    })
    expect(token.status).toBe(200)
    const system = bearer(token.json.access_token)
    const write = (method: string, path: string, body: Record<string, unknown>) =>
      Effect.tap(call(method, `${server.base}/${path}`, { body, headers: system }), (reply) => expect(reply.status).toBe(201))
    yield* write("PUT", "Practitioner/pr-ada", { resourceType: "Practitioner", id: "pr-ada", name: [{ family: "Adams", given: ["Ada"] }] })
    yield* write("PUT", "Patient/pt-pat", { resourceType: "Patient", id: "pt-pat", name: [{ family: "Palmer", given: ["Pat"] }] })
    const grace = yield* write("POST", "Practitioner", {
      resourceType: "Practitioner",
      identifier: [{ system: staffSystem, value: "staff-1042" }],
      name: [{ family: "Green", given: ["Grace"] }]
    })
    const bob = yield* write("POST", "Patient", { resourceType: "Patient", name: [{ family: "Brown", given: ["Bob"] }] })
    yield* server.searchIndexed
    return { grace: grace.json.id as string, bob: bob.json.id as string }
  })

/**
 * The provider first, with svc's callback on a port chosen now (the provider knows its clients' redirect
 * URIs from the start), then svc on that port with the provider as its upstream.
 */
const setup = (kind: "sqlite" | "postgres") =>
  Layer.scoped(
    Setup,
    Effect.gen(function*() {
      const port = yield* closedPort
      const url = `http://127.0.0.1:${port}`
      const provider = yield* startOidcProvider({ callbackUrl: callbackUrlFor(url), accounts })
      const server = yield* startServer(kind, {
        server: { bind: `127.0.0.1:${port}` },
        smart: {
          enabled: true,
          demo_login: false,
          oidc: {
            issuer: provider.issuer,
            client_id: provider.clientId,
            scopes: ["openid", "profile", "email"],
            patient_from_fhir_user: true,
            fhir_user_lookup: { resource_type: "Practitioner", claim: "sub", system: staffSystem },
            allowed_email_domains: ["example.org"],
            allowed_claims: { role: ["clinician", "patient"] }
          }
        },
        conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true }
      }).pipe(
        Effect.provideService(SmartSecrets, {
          dcrToken: Redacted.make(dcrToken),
          confidentialSecret: Redacted.make(confidentialSecret),
          oidcClientSecret: Redacted.make(provider.clientSecret)
        }),
        Effect.orDie
      )
      expect(server.url).toBe(url)
      const ids = yield* seed(server)
      const browser = yield* launchBrowser
      return { server, provider, browser, ids }
    })
  )

/** An app registered by DCR as a public client, asking for `scope`; stopped when the scope closes. */
const registeredApp = (server: TestServer, scope: string) =>
  Effect.gen(function*() {
    let clientId = ""
    const app = yield* Effect.acquireRelease(Effect.promise(() => startSmartApp(() => ({ clientId, scope }))), (app) => Effect.promise(app.close))
    const registered = yield* call("POST", `${server.url}/auth/register`, {
      body: { client_name: "Ward List", redirect_uris: [app.redirectUri], token_endpoint_auth_method: "none" },
      headers: { "content-type": "application/json", ...bearer(dcrToken) }
    })
    expect(registered.status).toBe(201)
    clientId = registered.json.client_id
    return { app, clientId }
  })

/** What each tab's console said (a refused form submission, for one), for the message of a failed step. */
const consoles = new WeakMap<Page, Array<string>>()

/**
 * A tab in a browser context of its own (no cookie of another case, no session at the provider), which
 * may load nothing but 127.0.0.1: the provider's development pages import a web font.
 */
const freshTab = (browser: Browser): Effect.Effect<Page, never, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Effect.acquireRelease(Effect.promise(() => browser.createBrowserContext()), (context) => Effect.promise(() => context.close()))
    return yield* Effect.promise(async () => {
      const page = await context.newPage()
      const said: Array<string> = []
      consoles.set(page, said)
      page.on("console", (message) => void said.push(message.text()))
      page.setDefaultNavigationTimeout(15_000)
      await page.setRequestInterception(true)
      page.on("request", (request) => {
        if (new URL(request.url()).hostname === "127.0.0.1") void request.continue()
        else void request.abort()
      })
      return page
    })
  })

/** Clicks what `selector` finds and waits for the page it leads to; a failure says what the console said. */
const follow = async (page: Page, selector: string): Promise<void> => {
  try {
    await Promise.all([page.waitForNavigation(), page.click(selector)])
  } catch (error) {
    const said = consoles.get(page) ?? []
    throw new Error(`${selector} on ${page.url()}: ${error instanceof Error ? error.message : String(error)}; the console said: ${said.join(" | ")}`)
  }
}

const heading = (page: Page) => page.$eval("h1", (h) => h.textContent ?? "")

/**
 * The user's way from the app to svc's callback: the app's launch, svc's sign-in page (the organisation's
 * button, no demo form), the provider's sign-in and consent pages as `account`, and back to svc.
 */
const signInThroughProvider = ({ server, provider, browser }: Fixture, app: SmartApp, account: string) =>
  Effect.gen(function*() {
    const page = yield* freshTab(browser)
    yield* Effect.promise(async () => {
      await page.goto(`${app.url}/launch?standalone=${encodeURIComponent(server.base)}`)
      expect(page.url().startsWith(`${server.url}/auth/authorize`)).toBe(true)
      expect(await heading(page)).toBe("Sign in")
      expect(await page.$("input[name=username]")).toBeNull()
      await follow(page, "button::-p-text(Sign in with your organisation)")
      // The provider's own sign-in page, reached through svc's redirect (its form-action allowed it).
      expect(page.url().startsWith(`${provider.issuer}/interaction/`)).toBe(true)
      await page.type("input[name=login]", account)
      await page.type("input[name=password]", "any password")
      await follow(page, "button::-p-text(Sign-in)")
      await follow(page, "button::-p-text(Continue)")
      expect(page.url().startsWith(`${server.url}/auth/login/callback?`)).toBe(true)
    })
    return page
  })

/** Allows on svc's consent page and waits for the app to have its tokens: the app's client. */
const allow = (page: Page, app: SmartApp) =>
  Effect.promise(async () => {
    expect(await heading(page)).toMatch(/^Allow Ward List to access health records\?$/)
    await follow(page, "button[name=decision][value=allow]")
    await page.waitForSelector("#ready")
    expect(app.errors).toEqual([])
    return app.clients.at(-1)
  })

/** The id_token as a relying party checks it: signed with svc's published keys, for this app, from svc. */
const verifiedIdToken = (server: TestServer, client: any, clientId: string) =>
  Effect.promise(async () => {
    const { payload } = await jwtVerify(client.state.tokenResponse.id_token as string, createRemoteJWKSet(new URL(`${server.url}/auth/jwks`)), {
      issuer: server.url,
      audience: clientId
    })
    return payload
  })

/** The server's log lines of refused sign-ins. */
const refusals = (server: TestServer) =>
  server.lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line["message"] === "sign-in refused")

/** svc's sign-in page shown again with the refusal, and nothing sent to the app. */
const expectRefusedAtSignIn = (page: Page, app: SmartApp) =>
  Effect.promise(async () => {
    expect(await page.title()).toBe("Error: Sign in")
    expect(await page.$eval("[role=alert]", (p) => p.textContent)).toBe(refusalMessages.not_allowed)
    expect(await page.$("button::-p-text(Sign in with your organisation)")).not.toBeNull()
    expect(app.clients).toEqual([])
    expect(app.errors).toEqual([])
  })

const lookupCase = () =>
  Effect.gen(function*() {
    const fixture = yield* Setup
    const { app, clientId } = yield* registeredApp(fixture.server, "openid fhirUser user/Practitioner.rs")
    const page = yield* signInThroughProvider(fixture, app, "staff-1042")
    const client = yield* allow(page, app)
    const practitioner = `Practitioner/${fixture.ids.grace}`
    expect(client.state.tokenResponse.fhirUser).toBe(practitioner)
    const idToken = yield* verifiedIdToken(fixture.server, client, clientId)
    expect(idToken.sub).toBe(`${fixture.provider.issuer}|staff-1042`)
    expect(idToken.fhirUser).toBe(`${fixture.server.base}/${practitioner}`)
    // The app reads its user with the token it got.
    const user: any = yield* Effect.promise(() => client.user.read())
    expect(user.name[0].family).toBe("Green")
  })

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf((kind === "postgres" && !pgAvailable) || !browserAvailable || skipRealPackages)(`SMART sign-in through an OpenID provider on ${kind}`, () => {
    layer(setup(kind), { timeout: 180_000, excludeTestServices: true })((it) => {
      it.scoped("binds a user without a fhirUser claim to the Practitioner whose identifier is their sub", lookupCase, 60_000)

      if (kind !== "sqlite") return

      it.scoped("carries the provider's fhirUser claim into the token response and the id_token, after the patient picker", () =>
        Effect.gen(function*() {
          const fixture = yield* Setup
          const { server, provider, ids } = fixture
          const { app, clientId } = yield* registeredApp(server, "launch/patient openid fhirUser patient/*.rs")
          const page = yield* signInThroughProvider(fixture, app, "ada")
          yield* Effect.promise(async () => {
            expect(await heading(page)).toBe("Find a patient")
            await page.click(`input[name=patient][value="${ids.bob}"]`)
            await follow(page, "button::-p-text(Continue)")
          })
          const client = yield* allow(page, app)
          expect(client.patient.id).toBe(ids.bob)
          expect(client.state.tokenResponse.fhirUser).toBe("Practitioner/pr-ada")
          expect(client.getFhirUser()).toBe("Practitioner/pr-ada")
          const idToken = yield* verifiedIdToken(server, client, clientId)
          expect(idToken).toMatchObject({ sub: `${provider.issuer}|ada`, fhirUser: `${server.base}/Practitioner/pr-ada` })
          const bob: any = yield* Effect.promise(() => client.request(`Patient/${ids.bob}`))
          expect(bob.name[0].family).toBe("Brown")
        }), 60_000)

      it.scoped("gives a user whose fhirUser is a Patient that patient, with no picker, though the app asked for launch/patient", () =>
        Effect.gen(function*() {
          const fixture = yield* Setup
          const { app } = yield* registeredApp(fixture.server, "launch/patient openid fhirUser patient/*.rs")
          const page = yield* signInThroughProvider(fixture, app, "pat")
          yield* Effect.promise(async () => {
            expect(await page.$("input[name=patient]")).toBeNull()
            // Consent names the patient, read from the store.
            expect(await page.$eval("main", (main) => main.textContent)).toContain("for the patient Pat Palmer")
          })
          const client = yield* allow(page, app)
          expect(client.patient.id).toBe("pt-pat")
          expect(client.state.tokenResponse.patient).toBe("pt-pat")
          expect(client.state.tokenResponse.fhirUser).toBe("Patient/pt-pat")
          const patient: any = yield* Effect.promise(() => client.patient.read())
          expect(patient.name[0].family).toBe("Palmer")
        }), 60_000)

      it.scoped("refuses a user whose e-mail domain is not allowed: svc's sign-in page again, and no code for the app", () =>
        Effect.gen(function*() {
          const fixture = yield* Setup
          const before = refusals(fixture.server).length
          const { app } = yield* registeredApp(fixture.server, "openid fhirUser user/Practitioner.rs")
          const page = yield* signInThroughProvider(fixture, app, "cy")
          yield* expectRefusedAtSignIn(page, app)
          const logged = refusals(fixture.server).slice(before)
          expect(logged).toHaveLength(1)
          expect(logged[0]).toMatchObject({ level: "warn", reason: "not_allowed", detail: "e-mail domain other.org is not one of [example.org]" })
        }), 60_000)

      it.scoped("admits a user whose role claim is allowed and refuses one whose role is not", () =>
        Effect.gen(function*() {
          const fixture = yield* Setup
          // Ada (role clinician) gets in.
          const admitted = yield* registeredApp(fixture.server, "openid fhirUser user/Practitioner.rs")
          const client = yield* allow(yield* signInThroughProvider(fixture, admitted.app, "ada"), admitted.app)
          expect(client.state.tokenResponse.fhirUser).toBe("Practitioner/pr-ada")
          // Nia (role nurse, at example.org) does not.
          const before = refusals(fixture.server).length
          const { app } = yield* registeredApp(fixture.server, "openid fhirUser user/Practitioner.rs")
          const page = yield* signInThroughProvider(fixture, app, "nia")
          yield* expectRefusedAtSignIn(page, app)
          const logged = refusals(fixture.server).slice(before)
          expect(logged).toHaveLength(1)
          expect(logged[0]).toMatchObject({ level: "warn", reason: "not_allowed", detail: "claim role is [nurse]; one of [clinician, patient] is required" })
          // The log names the rule and the value, never a secret.
          const log = fixture.server.lines.join("\n")
          expect(log).not.toContain(fixture.provider.clientSecret)
          expect(log).not.toContain(client.state.tokenResponse.access_token)
        }), 60_000)
    })
  })
}
