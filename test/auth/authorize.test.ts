/**
 * The authorization endpoint and the code exchange on the real server, as an HTTP client sees them (no
 * browser): what is answered with an error page and never sent to the app, what goes back to the app's
 * redirect URI as an OAuth error, the binding of the flow to the browser and its forms, and the rules of the
 * code at the token endpoint (PKCE verifier, redirect URI, client, single use).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { s256 } from "../../src/auth/pkce.ts"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

const dcrToken = "authorize-test-dcr-token-000000"
const secrets = { dcrToken: Redacted.make(dcrToken), confidentialSecret: Redacted.make("authorize-test-confidential-0000"), oidcClientSecret: undefined }
const redirectUri = "http://127.0.0.1:9/callback"
const verifier = "a-verifier-of-enough-length-for-rfc-7636-0123456789"

interface Browser {
  cookie: string | undefined
}

const hidden = (html: string, name: string): string => {
  const match = new RegExp(`name="${name}" value="([^"]*)"`).exec(html)
  if (match === null) throw new Error(`no hidden ${name} in the page`)
  return match[1]!
}

const request = (method: string, url: string, browser: Browser, body?: Record<string, string | ReadonlyArray<string>>) =>
  Effect.promise(async () => {
    const form = new URLSearchParams()
    for (const [name, value] of Object.entries(body ?? {})) for (const v of typeof value === "string" ? [value] : value) form.append(name, v)
    const response = await fetch(url, {
      method,
      redirect: "manual",
      headers: {
        ...(browser.cookie === undefined ? {} : { cookie: browser.cookie }),
        ...(body === undefined ? {} : { "content-type": "application/x-www-form-urlencoded" })
      },
      ...(body === undefined ? {} : { body: form.toString() })
    })
    const setCookie = response.headers.get("set-cookie")
    if (setCookie !== null) browser.cookie = setCookie.split(";")[0]
    return { status: response.status, location: response.headers.get("location"), headers: response.headers, text: await response.text() }
  })

const authorizeParams = (server: TestServer, clientId: string, extra: Record<string, string | undefined> = {}) => {
  const params: Record<string, string> = {
    response_type: "code",
    client_id: clientId,
    redirect_uri: redirectUri,
    scope: "openid fhirUser user/Patient.rs offline_access",
    state: "st-123",
    aud: server.base,
    code_challenge: s256(verifier),
    code_challenge_method: "S256"
  }
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete params[name]
    else params[name] = value
  }
  return params
}

const authorizeUrl = (server: TestServer, clientId: string, extra: Record<string, string | undefined> = {}) =>
  `${server.url}/auth/authorize?${new URLSearchParams(authorizeParams(server, clientId, extra))}`

/** Signs in with the demo login and consents to `scopes` (all asked when undefined): the redirect back. */
const consent = (server: TestServer, browser: Browser, loginPage: string, decision: "allow" | "deny", scopes?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const consentPage = yield* request("POST", `${server.url}/auth/login`, browser, {
      request: hidden(loginPage, "request"),
      csrf: hidden(loginPage, "csrf"),
      username: "demo-user"
    })
    expect(consentPage.status).toBe(200)
    const offered = [...consentPage.text.matchAll(/name="scope" value="([^"]*)"/g)].map((m) => m[1]!)
    return yield* request("POST", `${server.url}/auth/consent`, browser, {
      request: hidden(consentPage.text, "request"),
      csrf: hidden(consentPage.text, "csrf"),
      decision,
      scope: scopes ?? offered
    })
  })

const codeOf = (location: string | null): string => {
  const url = new URL(location ?? "http://invalid/")
  expect(url.searchParams.get("state")).toBe("st-123")
  return url.searchParams.get("code")!
}

const exchange = (server: TestServer, clientId: string, code: string, extra: Record<string, string> = {}) =>
  call("POST", `${server.url}/auth/token`, {
    body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier, client_id: clientId, ...extra }).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" }
  })

const register = (server: TestServer, name: string) =>
  Effect.map(
    call("POST", `${server.url}/auth/register`, {
      body: { client_name: name, redirect_uris: [redirectUri], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"] },
      headers: { "content-type": "application/json", authorization: `Bearer ${dcrToken}` }
    }),
    (reply) => reply.json.client_id as string
  )

describe("the authorization endpoint on sqlite", () => {
  it.scopedLive("answers an unknown client or redirect URI with a page and sends the app every other error with its state", () =>
    Effect.gen(function*() {
      const server = yield* startServer("sqlite", { smart: { enabled: true, demo_login: true } }).pipe(Effect.provideService(SmartSecrets, secrets))
      const clientId = yield* register(server, "App")
      const browser: Browser = { cookie: undefined }

      for (const url of [authorizeUrl(server, "no-such-client"), authorizeUrl(server, clientId, { redirect_uri: "http://127.0.0.1:9/elsewhere" }), authorizeUrl(server, clientId, { redirect_uri: undefined })]) {
        const page = yield* request("GET", url, browser)
        expect([url, page.status, page.location]).toEqual([url, 400, null])
        expect(page.headers.get("content-type")).toContain("text/html")
      }

      const cases: ReadonlyArray<readonly [Record<string, string | undefined>, string]> = [
        [{ response_type: "token" }, "unsupported_response_type"],
        [{ state: undefined }, "invalid_request"],
        [{ code_challenge: undefined }, "invalid_request"],
        [{ code_challenge_method: "plain" }, "invalid_request"],
        [{ aud: "http://example.org/fhir" }, "invalid_request"],
        [{ launch: "no-such-launch" }, "invalid_request"],
        [{ scope: "launch openid" }, "invalid_request"],
        [{ scope: "nonsense other/thing" }, "invalid_scope"]
      ]
      for (const [extra, error] of cases) {
        const answer = yield* request("GET", authorizeUrl(server, clientId, extra), browser)
        expect([extra, answer.status]).toEqual([extra, 302])
        const location = new URL(answer.location!)
        expect(`${location.origin}${location.pathname}`).toBe(redirectUri)
        expect([extra, location.searchParams.get("error")]).toEqual([extra, error])
        if (extra.state === undefined && "state" in extra) expect(location.searchParams.has("state")).toBe(false)
        else expect(location.searchParams.get("state")).toBe("st-123")
      }
    }))

  it.scopedLive("binds the flow to its browser and forms, grants what the user ticked, and keeps the code's rules", () =>
    Effect.gen(function*() {
      const server = yield* startServer("sqlite", { smart: { enabled: true, demo_login: true } }).pipe(Effect.provideService(SmartSecrets, secrets))
      const clientId = yield* register(server, "App")
      const otherClient = yield* register(server, "Other")
      const browser: Browser = { cookie: undefined }
      const login = yield* request("GET", authorizeUrl(server, clientId), browser)
      expect(login.status).toBe(200)
      expect(login.headers.get("cache-control")).toBe("no-store")
      expect(browser.cookie).toMatch(/^svc_authz=/)

      // Another browser (no cookie), or a form without its csrf value, finds the request expired.
      const stranger = yield* request("POST", `${server.url}/auth/login`, { cookie: undefined }, { request: hidden(login.text, "request"), csrf: hidden(login.text, "csrf"), username: "x" })
      expect(stranger.status).toBe(400)
      expect(stranger.text).toContain("expired")
      const forged = yield* request("POST", `${server.url}/auth/login`, browser, { request: hidden(login.text, "request"), csrf: "forged", username: "x" })
      expect(forged.status).toBe(400)

      // The user unticks offline_access: no refresh token.
      const back = yield* consent(server, browser, login.text, "allow", ["openid", "fhirUser", "user/Patient.rs"])
      expect(back.status).toBe(302)
      const code = codeOf(back.location)

      expect((yield* exchange(server, clientId, code, { code_verifier: "another-verifier-of-enough-length-0123456789abc" })).json.error).toBe("invalid_grant")
      // A refused exchange spends the code as well: it is gone after one try.
      expect((yield* exchange(server, clientId, code)).json.error).toBe("invalid_grant")

      const again = yield* request("POST", `${server.url}/auth/authorize`, browser, authorizeParams(server, clientId))
      expect(again.status).toBe(200)
      const second = codeOf((yield* consent(server, browser, again.text, "allow", ["openid", "fhirUser", "user/Patient.rs"])).location)
      expect((yield* exchange(server, otherClient, second)).json.error).toBe("invalid_grant")

      const third = codeOf((yield* consent(server, browser, (yield* request("GET", authorizeUrl(server, clientId), browser)).text, "allow", ["user/Patient.rs", "openid"])).location)
      expect((yield* exchange(server, clientId, third, { redirect_uri: "http://127.0.0.1:9/elsewhere" })).json.error).toBe("invalid_grant")

      const fourth = codeOf((yield* consent(server, browser, (yield* request("GET", authorizeUrl(server, clientId), browser)).text, "allow", ["user/Patient.rs", "openid"])).location)
      const issued = yield* exchange(server, clientId, fourth)
      expect(issued.status).toBe(200)
      expect(issued.headers.get("cache-control")).toBe("no-store")
      expect(issued.json.scope).toBe("openid user/Patient.rs")
      expect(issued.json.refresh_token).toBeUndefined()
      expect(typeof issued.json.id_token).toBe("string")
      expect((yield* exchange(server, clientId, fourth)).json.error).toBe("invalid_grant")

      const denied = yield* consent(server, browser, (yield* request("GET", authorizeUrl(server, clientId), browser)).text, "deny")
      const deniedAt = new URL(denied.location!)
      expect(deniedAt.searchParams.get("error")).toBe("access_denied")
      expect(deniedAt.searchParams.get("state")).toBe("st-123")
    }))
})
