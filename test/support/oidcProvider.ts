/**
 * A real OpenID provider for tests (the `oidc-provider` package) on a free loopback port: an in-memory
 * account store, one confidential client whose redirect URI is the callback the test uses, PKCE required,
 * and its development sign-in and consent pages, which `signIn` fills in over plain HTTP the way a browser
 * would (cookies kept, redirects followed) until the provider sends the browser back to the callback.
 */
import { Effect, type Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import Provider from "oidc-provider"

export interface TestAccount {
  /** Claims beyond `sub` (the account id): name, email, email_verified, fhirUser, groups... */
  readonly [claim: string]: unknown
}

export interface TestProvider {
  /** `http://127.0.0.1:<port>` */
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** Signs `account` in and consents: the callback URL the browser is sent back to, with code and state. */
  readonly signIn: (authorizationUrl: string, account: string) => Effect.Effect<URL>
  /** Starts at the authorization URL and cancels at the sign-in page: the callback with `error=access_denied`. */
  readonly cancel: (authorizationUrl: string) => Effect.Effect<URL>
  /** How many times the discovery document was asked for. */
  readonly discoveries: () => number
}

export interface TestProviderOptions {
  readonly callbackUrl: string
  readonly accounts: Readonly<Record<string, TestAccount>>
  /** The claims released per scope; profile carries name, fhirUser, groups and role unless given. */
  readonly claims?: Readonly<Record<string, ReadonlyArray<string>>>
}

const defaultClaims = {
  openid: ["sub"],
  profile: ["name", "given_name", "family_name", "fhirUser", "groups", "role"],
  email: ["email", "email_verified"]
}

/** A browser's cookie jar, enough for one provider: names only, paths ignored. */
const cookieJar = () => {
  const cookies = new Map<string, string>()
  return {
    header: () => [...cookies].map(([name, value]) => `${name}=${value}`).join("; "),
    take: (response: Response) => {
      for (const line of response.headers.getSetCookie()) {
        const pair = line.split(";")[0] ?? ""
        const eq = pair.indexOf("=")
        const name = pair.slice(0, eq).trim()
        const value = pair.slice(eq + 1).trim()
        if (value === "" || /expires=Thu, 01 Jan 1970/i.test(line)) cookies.delete(name)
        else cookies.set(name, value)
      }
    }
  }
}

/** Runs the provider's pages from `authorizationUrl` until it redirects to `callbackUrl`. */
const browse = (
  authorizationUrl: string,
  callbackUrl: string,
  answer: (prompt: string) => Record<string, string> | "abort"
): Promise<URL> => {
  const jar = cookieJar()
  const go = async (url: string, init: RequestInit = {}): Promise<Response> => {
    const response = await fetch(url, { ...init, redirect: "manual", headers: { ...init.headers, cookie: jar.header() } })
    jar.take(response)
    return response
  }
  const run = async (): Promise<URL> => {
    let response = await go(authorizationUrl)
    for (let step = 0; step < 20; step++) {
      const location = response.headers.get("location")
      if (location !== null) {
        const next = new URL(location, response.url)
        if (next.href.startsWith(callbackUrl)) return next
        response = await go(next.href)
        continue
      }
      const html = await response.text()
      if (response.status !== 200) throw new Error(`the provider answered ${response.status}: ${html.slice(0, 500)}`)
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1]
      const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1]
      if (action === undefined || prompt === undefined) throw new Error(`no form on the provider's page: ${html.slice(0, 500)}`)
      const form = answer(prompt)
      if (form === "abort") {
        response = await go(new URL(`${action}/abort`, response.url).href)
        continue
      }
      response = await go(new URL(action, response.url).href, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ prompt, ...form }).toString()
      })
    }
    throw new Error("the provider never sent the browser back to the callback")
  }
  return run()
}

/** Starts the provider; it stops when the scope closes. */
export const startOidcProvider = (options: TestProviderOptions): Effect.Effect<TestProvider, never, Scope.Scope> =>
  Effect.gen(function*() {
    const server = Http.createServer()
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const issuer = `http://127.0.0.1:${port}`
    const clientId = "svc-test"
    const clientSecret = "a-client-secret-for-the-test-provider"
    const provider = new Provider(issuer, {
      clients: [{
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [options.callbackUrl],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
        require_auth_time: true
      }],
      claims: options.claims ?? defaultClaims,
      findAccount: (_ctx: unknown, id: string) => {
        const account = options.accounts[id]
        return account === undefined ? undefined : { accountId: id, claims: () => ({ ...account, sub: id }) }
      },
      pkce: { required: () => true },
      cookies: { keys: ["test-provider-cookie-key"] },
      features: { devInteractions: { enabled: true } },
      ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 }
    })
    let discoveries = 0
    const handle = provider.callback()
    server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      if (req.url === "/.well-known/openid-configuration") discoveries++
      handle(req, res)
    })
    const signIn = (authorizationUrl: string, account: string) =>
      Effect.promise(() => browse(authorizationUrl, options.callbackUrl, () => ({ login: account, password: "any" })))
    const cancel = (authorizationUrl: string) =>
      Effect.promise(() => browse(authorizationUrl, options.callbackUrl, () => "abort"))
    const started: TestProvider = { issuer, clientId, clientSecret, signIn, cancel, discoveries: () => discoveries }
    return started
  })
