/**
 * Real access tokens of a server run with `--smart` (`smart.demo_login`), got over HTTP as clients get them:
 * a system token of the built-in confidential client (client credentials), and a patient token of an EHR
 * launch (a public client registered by DCR, a launch context for the patient, the sign-in and consent pages
 * answered as a browser would, the code exchanged with its PKCE verifier).
 */
import { Effect, Redacted } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { expect } from "vitest"
import { call, type TestServer } from "./server.ts"

export const dcrToken = "smart-tokens-dcr-token-0123456789"
export const confidentialSecret = "smart-tokens-confidential-0123456789"
/** The secrets to provide as `SmartSecrets` to the server the tokens are got from. */
export const secrets = { dcrToken: Redacted.make(dcrToken), confidentialSecret: Redacted.make(confidentialSecret), oidcClientSecret: undefined }

const redirectUri = "http://127.0.0.1:9/callback"
const formHeaders = { "content-type": "application/x-www-form-urlencoded" }
const post = (url: string, fields: URLSearchParams | Record<string, string>, headers: Record<string, string> = {}) =>
  call("POST", url, { body: new URLSearchParams(fields).toString(), headers: { ...formHeaders, ...headers }, redirect: "manual" })

/** A hidden field of a sign-in or consent page. */
const field = (page: string, name: string): string => {
  const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(page)
  expect(match, `the page has a ${name} field`).not.toBeNull()
  return match![1]!
}

/** An access token of the confidential client for `scope` (client credentials). */
export const systemToken = (server: TestServer, scope: string) =>
  Effect.gen(function*() {
    const issued = yield* post(`${server.url}/auth/token`, { grant_type: "client_credentials", scope }, {
      authorization: `Basic ${Buffer.from(`svc-confidential:${confidentialSecret}`).toString("base64")}`
    })
    expect(issued.status, issued.text).toBe(200)
    return issued.json.access_token as string
  })

/** An access token for `scope` (with `launch`), bound to `patient` by an EHR launch. */
export const launchToken = (server: TestServer, patient: string, scope: string) =>
  Effect.gen(function*() {
    const registered = yield* call("POST", `${server.url}/auth/register`, {
      body: { client_name: "Live list", redirect_uris: [redirectUri], token_endpoint_auth_method: "none", grant_types: ["authorization_code"] },
      headers: { "content-type": "application/json", authorization: `Bearer ${dcrToken}` }
    })
    expect(registered.status, registered.text).toBe(201)
    const clientId = registered.json.client_id as string
    const launched = yield* call("POST", `${server.url}/auth/launch`, {
      body: { patient },
      headers: { "content-type": "application/json", authorization: `Bearer ${dcrToken}` }
    })
    expect(launched.status, launched.text).toBe(201)
    const verifier = randomBytes(32).toString("base64url")
    const query = new URLSearchParams({
      response_type: "code",
      client_id: clientId,
      redirect_uri: redirectUri,
      scope,
      state: "live",
      aud: server.base,
      launch: launched.json.launch,
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256"
    })
    const signIn = yield* call("GET", `${server.url}/auth/authorize?${query}`, { redirect: "manual" })
    expect(signIn.status, signIn.text).toBe(200)
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!
    const request = field(signIn.text, "request")
    const csrf = field(signIn.text, "csrf")
    const consentPage = yield* post(`${server.url}/auth/login`, { request, csrf, username: "live-user" }, { cookie })
    expect(consentPage.status, consentPage.text).toBe(200)
    const choice = new URLSearchParams({ request, csrf, decision: "allow" })
    for (const asked of scope.split(" ")) choice.append("scope", asked)
    const back = yield* post(`${server.url}/auth/consent`, choice, { cookie })
    expect(back.status, back.text).toBe(302)
    const code = new URL(back.headers.get("location")!).searchParams.get("code")!
    const issued = yield* post(`${server.url}/auth/token`, { grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier, client_id: clientId })
    expect(issued.status, issued.text).toBe(200)
    expect(issued.json.patient).toBe(patient)
    return issued.json.access_token as string
  })
