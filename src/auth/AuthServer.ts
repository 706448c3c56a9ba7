/**
 * The authorization server's endpoints (SMART App Launch 2.2; RFC 6749, 7636, 7662, 7009): the root routes
 * `/auth/authorize`, `/auth/login` (and its upstream callback), `/auth/picker`, `/auth/consent`,
 * `/auth/token`, `/auth/introspect`, `/auth/revoke`, `/auth/jwks`, `/auth/launch`, and the discovery
 * documents. docs/smart.md describes each flow step by step.
 *
 * An authorization runs: `authorize` checks the client, its redirect URI, PKCE, `aud` and the launch, keeps
 * the request as a pending authorization bound to the browser by a cookie, and shows the sign-in page; the
 * sign-in (demo, or the upstream OpenID provider) names the user; the picker, when the app asked for
 * `launch/patient` and no patient is known yet, names the patient; the consent page lets the user grant the
 * scopes asked or fewer; then a code goes back to the redirect URI, which the token endpoint exchanges.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Option, Redacted } from "effect"
import { CatalogService } from "../catalog/CatalogService.ts"
import { Database } from "../db/Database.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import * as Search from "../search/Search.ts"
import type { Authorizations, CodeGrant, Pending, SignedIn } from "./Authorizations.ts"
import { type Client, type Clients, clientAuthFailedResponse } from "./Clients.ts"
import { type AuthUrls, openidConfiguration, smartConfiguration } from "./Discovery.ts"
import { cookie, formOf, redirect, withQuery } from "./forms.ts"
import { jsonResponse, noStore, oauthError as oauthErrorAt } from "./oauthError.ts"
import { bearerToken, generateSecret, hashSecret, matchesHash, sameSecret } from "./secrets.ts"
import type { Grant } from "./Grant.ts"
import type { SigningKeys } from "./Keys.ts"
import * as Pages from "./pages.ts"
import { challengeProblem, verifies } from "./pkce.ts"
import { parseScope } from "./scopes.ts"
import type { Tokens } from "./Tokens.ts"
import type { SignInTransaction, Upstream } from "./oidc/Upstream.ts"
import { none as noSecurityEvents, type SecurityEvents } from "../governance/audit/SecurityEvents.ts"
import { authenticatedClient, claimedClient, signInFailed, tokenIssued, tokenRefused, tokenTypeHint } from "./decisions.ts"

/** The cookie that binds a pending authorization to the browser that began it. */
const browserCookie = "svc_authz"
/** The cookie that names the pending authorization while the user signs in upstream. */
const requestCookie = "svc_authz_request"

/** What the endpoints read besides the auth services: the database and the catalog (the picker's search). */
export type AuthEnv = Database | CatalogService

export interface AuthServerSettings {
  readonly urls: AuthUrls
  /** `smart.demo_login`: a sign-in that accepts any username. */
  readonly demoLogin: boolean
  /** `smart.patient`, `smart.encounter`: the demo EHR's current context, for launches created without one. */
  readonly demoPatient: string | undefined
  readonly demoEncounter: string | undefined
  /** `smart.fhir_user`: who the demo login signs in as. */
  readonly demoFhirUser: string | undefined
  /** The DCR token, which also lets the EHR create launch contexts. */
  readonly dcrToken: Redacted.Redacted<string>
}

export interface AuthServices {
  readonly keys: SigningKeys["Type"]
  readonly tokens: Tokens["Type"]
  readonly clients: Clients["Type"]
  readonly authorizations: Authorizations["Type"]
  readonly upstream: Upstream<unknown> | undefined
  /** Where each decision is recorded (the audit trail; docs/governance.md); nothing without it. */
  readonly audit?: SecurityEvents["Type"] | undefined
}

/** An OAuth error answer (RFC 6749 5.2): 400 unless said otherwise. */
const oauthError = (error: string, description: string, status = 400, headers: Readonly<Record<string, string>> = {}) =>
  oauthErrorAt(status, error, description, headers)

const json = (body: unknown, status = 200) => jsonResponse(status, body)

/** The human name of a Patient's JSON, for the picker. */
const patientName = (resource: Record<string, unknown>): string => {
  const names = Array.isArray(resource["name"]) ? (resource["name"] as Array<Record<string, unknown>>) : []
  const name = names[0]
  if (name === undefined) return "(no name)"
  if (typeof name["text"] === "string") return name["text"]
  const given = Array.isArray(name["given"]) ? (name["given"] as Array<unknown>).filter((g) => typeof g === "string").join(" ") : ""
  const family = typeof name["family"] === "string" ? name["family"] : ""
  return `${given} ${family}`.trim() || "(no name)"
}

export const make = (settings: AuthServerSettings, services: AuthServices) => {
  const { authorizations, clients, keys, tokens, upstream } = services
  const audit = services.audit ?? noSecurityEvents
  const urls = settings.urls
  const secure = urls.issuer.startsWith("https:")
  const cookieHeader = (value: string) =>
    `${browserCookie}=${value}; Path=/auth; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}; Max-Age=600`

  /** A page; `formTargets` are where its forms may lead the browser, redirects included (the CSP's form-action). */
  const html = (body: string, status = 200, formTargets: ReadonlyArray<string> = []) => {
    const headers = Pages.pageHeaders([urls.issuer, ...formTargets, ...(upstream === undefined ? [] : [upstream.issuer])])
    const { "Content-Type": contentType, ...rest } = headers
    return HttpServerResponse.text(body, { status, contentType: contentType ?? "text/html; charset=utf-8", headers: rest })
  }

  const errorPage = (title: string, message: string, status = 400) => html(Pages.errorPage({ title, message }), status)

  /** The pending authorization a form names, when the browser that began it sends it back with its csrf value. */
  const pendingOf = (request: RootRequest, form: URLSearchParams) =>
    Effect.gen(function*() {
      const id = form.get("request") ?? ""
      const found = id === "" ? undefined : yield* authorizations.pending(id)
      const browser = cookie(request.http, browserCookie)
      if (found === undefined || browser === undefined || !matchesHash(browser, found.browser)) return undefined
      if (request.http.method === "POST" && !sameSecret(form.get("csrf") ?? "", found.csrf)) return undefined
      return { id, pending: found }
    })

  const expired = () =>
    errorPage("This sign-in has expired", "The authorization request is unknown or has expired. Go back to the app and start again.")

  /** An error sent back to the client's redirect URI (RFC 6749 4.1.2.1). */
  const backToClient = (pending: Pick<Pending, "redirectUri" | "state">, error: string, description: string) =>
    redirect(withQuery(pending.redirectUri, { error, error_description: description, state: pending.state }))

  /** Whether the asked scopes want a patient picked: `launch/patient` with no patient known yet. */
  const needsPatient = (pending: Pending): boolean =>
    pending.scopes.includes("launch/patient") &&
    pending.launch?.patient === undefined &&
    pending.user?.patient === undefined &&
    pending.patient === undefined

  const clientName = (clientId: string) =>
    Effect.map(clients.find(clientId), (client) => client?.metadata.client_name ?? clientId)

  /** The page of the step the pending authorization is at: sign-in, picker or consent. */
  const nextStep = (id: string, pending: Pending, error?: string) =>
    Effect.gen(function*() {
      const name = yield* clientName(pending.clientId)
      if (pending.user === undefined) {
        return html(Pages.loginPage({
          action: urls.login,
          request: id,
          csrf: pending.csrf,
          clientName: name,
          demo: settings.demoLogin,
          ...(error === undefined ? {} : { error }),
          ...(upstream === undefined ? {} : { oidc: { action: `${urls.login}?upstream=1`, label: "Sign in with your organisation" } })
        }), 200, [pending.redirectUri])
      }
      if (needsPatient(pending)) return yield* picker(id, pending, "", error)
      const patient = patientOf(pending)
      const patientLabel = patient === undefined ? undefined : yield* patientLabelOf(patient)
      return html(Pages.consentPage({
        action: urls.consent,
        request: id,
        csrf: pending.csrf,
        clientName: name,
        ...(patientLabel === undefined ? {} : { patient: { name: patientLabel } }),
        scopes: pending.scopes.filter((scope) => parseScope(scope)._tag !== "Unknown").map((scope) => ({ scope, description: Pages.scopeDescription(scope) }))
      }), 200, [pending.redirectUri])
    })

  const patientOf = (pending: Pending): string | undefined =>
    pending.launch?.patient ?? pending.user?.patient ?? pending.patient

  const searchPatients = (params: URLSearchParams) =>
    Effect.gen(function*() {
      const db = yield* Database
      const catalog = yield* Effect.flatMap(CatalogService, (service) => service.get)
      const rows = yield* db.withReader((sql) => Search.run(sql, { catalog, params, lenient: false }, "Patient"))
      return rows.matches.map((row) => {
        const resource = JSON.parse(row.content) as Record<string, unknown>
        return {
          id: row.id,
          name: patientName(resource),
          ...(typeof resource["birthDate"] === "string" ? { birthDate: resource["birthDate"] } : {}),
          ...(typeof resource["gender"] === "string" ? { gender: resource["gender"] } : {})
        }
      })
    })

  const patientLabelOf = (id: string) =>
    Effect.map(searchPatients(new URLSearchParams({ _id: id })), (found) => found[0]?.name ?? `Patient/${id}`).pipe(
      Effect.orElseSucceed(() => `Patient/${id}`)
    )

  const picker = (id: string, pending: Pending, query: string, error?: string) =>
    Effect.gen(function*() {
      const params = new URLSearchParams({ _count: "50", _sort: "name" })
      if (query.trim() !== "") params.set("name", query.trim())
      const patients = yield* searchPatients(params).pipe(
        Effect.tapErrorCause((cause) => Effect.logWarning("the patient picker's search failed", cause)),
        Effect.orElseSucceed(() => [])
      )
      return html(Pages.pickerPage({
        action: urls.picker,
        request: id,
        csrf: pending.csrf,
        query,
        patients,
        ...(error === undefined ? {} : { error })
      }))
    })

  // GET and POST /auth/authorize (SMART App Launch 2.2 "authorize-post").
  const authorize: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      const form = yield* formOf(request.http)
      if (typeof form === "string") return errorPage("The authorization request cannot be read", form)
      const clientId = form.get("client_id") ?? ""
      const client = clientId === "" ? undefined : yield* clients.find(clientId)
      if (client === undefined) {
        return errorPage("Unknown app", clientId === "" ? "The request names no client_id." : "The app that sent you here is not registered with this server.")
      }
      const redirectUri = form.get("redirect_uri") ?? ""
      if (redirectUri === "" || !clients.redirectAllowed(client, redirectUri)) {
        return errorPage("Unknown return address", "The app asked to return to an address it has not registered. Nothing was sent to it.")
      }
      const state = form.get("state") ?? undefined
      const back = (error: string, description: string) => backToClient({ redirectUri, state }, error, description)
      if (form.get("response_type") !== "code") return back("unsupported_response_type", "response_type must be code")
      // SMART App Launch 2.2 requires it: the app's defence against a forged answer.
      if (state === undefined || state === "") return back("invalid_request", "state is required")
      if (!client.metadata.grant_types.includes("authorization_code")) return back("unauthorized_client", "this client may not use the authorization code grant")
      const challenge = form.get("code_challenge") ?? undefined
      const pkce = challengeProblem(challenge, form.get("code_challenge_method") ?? undefined)
      if (pkce !== undefined) return back("invalid_request", pkce)
      const aud = (form.get("aud") ?? "").replace(/\/+$/, "")
      if (aud !== urls.fhirBase) return back("invalid_request", `aud must be this server's FHIR base URL, ${urls.fhirBase}`)
      const scopes = (form.get("scope") ?? "").split(" ").filter((scope) => scope !== "")
      if (scopes.length === 0) return back("invalid_scope", "the request asks for no scope")
      if (scopes.every((scope) => parseScope(scope)._tag === "Unknown")) return back("invalid_scope", "none of the scopes asked for is known here")
      const launchId = form.get("launch") ?? undefined
      let launch: Pending["launch"] = undefined
      if (launchId !== undefined) {
        launch = yield* authorizations.launch(launchId)
        if (launch === undefined) return back("invalid_request", "the launch is unknown or has expired")
      } else if (scopes.includes("launch")) {
        return back("invalid_request", "the scope launch asks for an EHR launch, but the request has no launch parameter")
      }
      const browser = generateSecret()
      const pending: Pending = {
        clientId,
        redirectUri,
        scopes,
        state,
        codeChallenge: challenge!,
        nonce: form.get("nonce") ?? undefined,
        launch,
        csrf: generateSecret(),
        browser: hashSecret(browser)
      }
      const id = yield* authorizations.begin(pending)
      const page = yield* nextStep(id, pending)
      return HttpServerResponse.setHeader(page, "set-cookie", cookieHeader(browser))
    })

  /** Moves the flow on after a step changed `pending`. */
  const advance = (id: string, pending: Pending) =>
    Effect.flatMap(authorizations.update(id, pending), () => nextStep(id, pending))

  const signedIn = (id: string, pending: Pending, user: SignedIn, method: "demo" | "upstream") =>
    Effect.zipRight(
      audit.record({
        kind: "sign-in",
        outcome: "success",
        known: true,
        client: pending.clientId,
        user: user.subject,
        fhirUser: user.fhirUser,
        patient: pending.launch?.patient ?? user.patient,
        details: { method }
      }),
      advance(id, { ...pending, user })
    )

  // POST /auth/login: the demo sign-in, or the start of the upstream one.
  const login: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return errorPage("Sign in from the app", "Start from the app you are signing in to.", 405)
      const form = yield* formOf(request.http)
      if (typeof form === "string") return errorPage("The sign-in cannot be read", form)
      const found = yield* pendingOf(request, form)
      if (found === undefined) return expired()
      const { id, pending } = found
      const now = Math.floor((yield* Effect.clockWith((clock) => clock.currentTimeMillis)) / 1000)
      if (new URL(request.http.url, urls.issuer).searchParams.has("upstream") && upstream !== undefined) {
        const began = yield* upstream.begin(id).pipe(Effect.either)
        if (began._tag === "Left") {
          yield* audit.record(signInFailed(pending.clientId, began.left))
          return yield* nextStep(id, pending, "The organisation's sign-in cannot be reached now. Try again later.")
        }
        yield* authorizations.update(id, { ...pending, upstream: began.right.transaction })
        // The callback finds its pending authorization by this cookie; the upstream never sees its id.
        return redirect(began.right.url, { "set-cookie": `${requestCookie}=${id}; Path=/auth/login; HttpOnly; SameSite=Lax${secure ? "; Secure" : ""}; Max-Age=600` })
      }
      if (!settings.demoLogin) return yield* nextStep(id, pending, "Sign in with your organisation.")
      const username = (form.get("username") ?? "").trim()
      if (username === "") return yield* nextStep(id, pending, "Enter a username.")
      return yield* signedIn(id, pending, { subject: username, fhirUser: settings.demoFhirUser, authTime: now }, "demo")
    })

  // GET /auth/login/callback: the upstream provider's answer.
  const loginCallback: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (upstream === undefined) return errorPage("Not available", "This server has no upstream sign-in.", 404)
      const url = new URL(request.http.url, urls.issuer)
      const browser = cookie(request.http, browserCookie)
      const id = cookie(request.http, requestCookie) ?? ""
      const pending = id === "" ? undefined : yield* authorizations.pending(id)
      if (pending === undefined || browser === undefined || !matchesHash(browser, pending.browser) || pending.upstream === undefined) {
        return expired()
      }
      const result = yield* upstream.complete(url, pending.upstream as SignInTransaction).pipe(Effect.either)
      if (result._tag === "Left") {
        // The module logged the detail; the user sees what may be shown.
        const failure = result.left
        const message = typeof failure === "object" && failure !== null && "message" in failure && typeof failure.message === "string"
          ? failure.message
          : "The sign-in could not be completed. Try again."
        yield* audit.record(signInFailed(pending.clientId, failure))
        return yield* nextStep(id, { ...pending, upstream: undefined }, message)
      }
      const user = result.right
      const now = Math.floor((yield* Effect.clockWith((clock) => clock.currentTimeMillis)) / 1000)
      return yield* signedIn(id, { ...pending, upstream: undefined }, {
        subject: user.subject,
        fhirUser: user.fhirUser,
        patient: user.patient,
        name: user.name,
        authTime: now
      }, "upstream")
    })

  // GET (search) and POST (choose) /auth/picker.
  const pickerStep: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      const form = yield* formOf(request.http)
      if (typeof form === "string") return errorPage("The form cannot be read", form)
      const found = yield* pendingOf(request, form)
      if (found === undefined) return expired()
      const { id, pending } = found
      if (pending.user === undefined) return yield* nextStep(id, pending)
      const chosen = form.get("patient")
      if (request.http.method !== "POST" || chosen === null) return yield* picker(id, pending, form.get("q") ?? "")
      const exists = yield* searchPatients(new URLSearchParams({ _id: chosen })).pipe(Effect.orElseSucceed(() => []))
      if (exists.length === 0) return yield* picker(id, pending, form.get("q") ?? "", "Choose a patient from the list.")
      return yield* advance(id, { ...pending, patient: chosen })
    })

  // POST /auth/consent: allow (some or all of the scopes) or deny.
  const consent: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return errorPage("Consent from the app", "Start from the app you are signing in to.", 405)
      const form = yield* formOf(request.http)
      if (typeof form === "string") return errorPage("The form cannot be read", form)
      const found = yield* pendingOf(request, form)
      if (found === undefined) return expired()
      const { id, pending } = found
      if (pending.user === undefined || needsPatient(pending)) return yield* nextStep(id, pending)
      const consented = { kind: "consent", known: true, client: pending.clientId, user: pending.user.subject, fhirUser: pending.user.fhirUser, patient: patientOf(pending), encounter: pending.launch?.encounter } as const
      if (form.get("decision") !== "allow") {
        yield* authorizations.end(id)
        yield* audit.record({ ...consented, outcome: "refused", reason: "access_denied: the user denied the request", scopes: pending.scopes })
        return backToClient(pending, "access_denied", "the user denied the request")
      }
      const checked = new Set(form.getAll("scope"))
      const granted = pending.scopes.filter((scope) => checked.has(scope) && parseScope(scope)._tag !== "Unknown")
      const patient = patientOf(pending)
      const grant: Grant = {
        clientId: pending.clientId,
        scopes: granted,
        subject: pending.user.subject,
        fhirUser: pending.user.fhirUser,
        patient,
        encounter: pending.launch?.encounter,
        // A standalone launch has no EHR around it to show who the patient is.
        needPatientBanner: pending.launch === undefined,
        authTime: pending.user.authTime,
        nonce: pending.nonce
      }
      const codeGrant: CodeGrant = { grant, redirectUri: pending.redirectUri, codeChallenge: pending.codeChallenge }
      const code = yield* authorizations.issueCode(id, codeGrant)
      yield* audit.record({ ...consented, outcome: "success", scopes: granted })
      return redirect(withQuery(pending.redirectUri, { code, state: pending.state }))
    })

  /** The token response (SMART App Launch 2.2, "Response to token request"). */
  const tokenResponse = (grant: Grant, refreshToken: string | undefined, client: Client, grantType: string) =>
    Effect.gen(function*() {
      const access = yield* tokens.issueAccess(grant)
      const idToken = grant.scopes.includes("openid") && grant.subject !== undefined ? yield* tokens.issueIdToken(grant, grant.clientId) : undefined
      yield* audit.record(tokenIssued(client, grant, grantType))
      const launchContext = grant.scopes.some((scope) => scope === "launch" || scope.startsWith("launch/"))
      return json({
        access_token: access.accessToken,
        token_type: "Bearer",
        expires_in: access.expiresIn,
        scope: grant.scopes.join(" "),
        ...(idToken === undefined ? {} : { id_token: idToken }),
        ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
        ...(grant.patient === undefined ? {} : { patient: grant.patient }),
        ...(grant.encounter === undefined ? {} : { encounter: grant.encounter }),
        ...(grant.fhirUser === undefined || !grant.scopes.includes("fhirUser") ? {} : { fhirUser: grant.fhirUser }),
        ...(launchContext && grant.needPatientBanner !== undefined ? { need_patient_banner: grant.needPatientBanner } : {}),
        ...(launchContext && grant.smartStyleUrl !== undefined ? { smart_style_url: grant.smartStyleUrl } : {})
      })
    })

  /** A refresh token when the grant asks for one: `offline_access` wins over `online_access`. */
  const refreshFor = (grant: Grant) =>
    grant.scopes.includes("offline_access")
      ? Effect.map(tokens.issueRefresh(grant, "offline"), (token): string | undefined => token)
      : grant.scopes.includes("online_access")
      ? Effect.map(tokens.issueRefresh(grant, "online"), (token): string | undefined => token)
      : Effect.succeed(undefined)

  /** The client of a token, introspection or revocation request, or the OAuth error answer (recorded as a refused `kind`). */
  const authenticated = (request: RootRequest, form: URLSearchParams, kind?: "token" | "revocation") =>
    clients.authenticate({ headers: request.http.headers, form }).pipe(
      Effect.map((authenticated) => authenticated.client),
      Effect.catchTag("ClientAuthFailed", (failure) =>
        Effect.zipRight(
          kind === undefined ? Effect.void : audit.record({
            kind,
            outcome: "refused",
            known: false,
            client: claimedClient(request.http.headers, form),
            reason: `${failure.error}: ${failure.description}`,
            details: kind === "token" ? { grant_type: form.get("grant_type") ?? undefined } : undefined
          }),
          Effect.fail(clientAuthFailedResponse(failure))
        ))
    )

  /** Whether the request carries no client authentication of any kind (not even a `client_id`). */
  const noCredentials = (request: RootRequest, form: URLSearchParams): boolean =>
    request.http.headers["authorization"] === undefined && !form.has("client_id") && !form.has("client_assertion")

  /**
   * The client of a refresh request that names none: a public client need not (RFC 6749 6 asks only confidential
   * clients to authenticate), and the refresh token is bound to its client. Any other client must authenticate.
   */
  const publicRefresher = (refreshToken: string) =>
    Effect.gen(function*() {
      const clientId = yield* tokens.refreshClient(refreshToken)
      const client = clientId === undefined ? undefined : yield* clients.find(clientId)
      const refused = (error: string, description: string) =>
        audit.record({ kind: "token", outcome: "refused", known: false, client: client?.clientId, reason: `${error}: ${description}`, details: { grant_type: "refresh_token" } })
      if (client === undefined) {
        yield* refused("invalid_grant", "the refresh token is unknown, expired, used or revoked")
        return yield* Effect.fail(oauthError("invalid_grant", "the refresh token is unknown, expired, used or revoked"))
      }
      if (client.metadata.token_endpoint_auth_method !== "none") {
        yield* refused("invalid_client", "this client must authenticate to refresh")
        return yield* Effect.fail(oauthError("invalid_client", "this client must authenticate to refresh", 401))
      }
      return client
    })

  // POST /auth/token.
  const token: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return oauthError("invalid_request", "the token endpoint takes POST", 405, { allow: "POST" })
      const form = yield* formOf(request.http)
      if (typeof form === "string") return oauthError("invalid_request", form)
      const grantType = form.get("grant_type")
      const client = grantType === "refresh_token" && noCredentials(request, form)
        ? yield* publicRefresher(form.get("refresh_token") ?? "")
        : yield* authenticated(request, form, "token")
      const allowed: ReadonlyArray<string> = client.metadata.grant_types
      /** The OAuth error answer, with the refusal recorded. */
      const refuse = (error: string, description: string, outcome: "refused" | "failed" = "refused") =>
        Effect.as(audit.record({ ...tokenRefused(client, grantType, error, description, form.get("scope")), outcome }), oauthError(error, description))
      switch (grantType) {
        case "authorization_code": {
          const code = form.get("code") ?? ""
          const redeemed = code === "" ? undefined : yield* authorizations.redeemCode(code)
          if (redeemed === undefined || redeemed.grant.clientId !== client.clientId) {
            return yield* refuse("invalid_grant", "the code is unknown, expired, already used or not this client's")
          }
          if (form.get("redirect_uri") !== redeemed.redirectUri) return yield* refuse("invalid_grant", "redirect_uri differs from the authorization request's")
          if (!verifies(form.get("code_verifier") ?? undefined, redeemed.codeChallenge)) {
            return yield* refuse("invalid_grant", "code_verifier does not match the code_challenge")
          }
          return yield* tokenResponse(redeemed.grant, yield* refreshFor(redeemed.grant), client, grantType)
        }
        case "refresh_token": {
          if (!allowed.includes("refresh_token") && !client.builtIn) return yield* refuse("unauthorized_client", "this client may not use refresh tokens")
          const scope = form.get("scope")
          const refreshed = yield* tokens.redeemRefresh(form.get("refresh_token") ?? "", client.clientId, scope === null ? undefined : scope.split(" ").filter((s) => s !== "")).pipe(Effect.either)
          // A reused refresh token is refused here too, after its family was revoked (Tokens.redeemRefresh).
          if (refreshed._tag === "Left") return yield* refuse("invalid_grant", refreshed.left.reason, refreshed.left._tag === "TokenStoreError" ? "failed" : "refused")
          return yield* tokenResponse(refreshed.right.grant, refreshed.right.refreshToken, client, grantType)
        }
        case "client_credentials": {
          if (!allowed.includes("client_credentials") || client.metadata.token_endpoint_auth_method === "none") {
            return yield* refuse("unauthorized_client", "this client may not use the client_credentials grant")
          }
          const asked = (form.get("scope") ?? "").split(" ").filter((scope) => scope !== "")
          const granted = asked.filter((scope) => {
            const parsed = parseScope(scope)
            return parsed._tag === "Resource" && parsed.context === "system"
          })
          if (granted.length === 0) return yield* refuse("invalid_scope", "a backend client may ask only for system/ scopes")
          return yield* tokenResponse({ clientId: client.clientId, scopes: granted }, undefined, client, grantType)
        }
        case null:
          return yield* refuse("invalid_request", "grant_type is missing")
        default:
          return yield* refuse("unsupported_grant_type", `grant_type ${grantType} is not supported`)
      }
    }).pipe(Effect.catchIf((e): e is HttpServerResponse.HttpServerResponse => HttpServerResponse.isServerResponse(e), Effect.succeed))

  // POST /auth/introspect (RFC 7662): for a client that authenticates, or a caller with a valid access token.
  const introspect: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return oauthError("invalid_request", "the introspection endpoint takes POST", 405, { allow: "POST" })
      const form = yield* formOf(request.http)
      if (typeof form === "string") return oauthError("invalid_request", form)
      const bearer = bearerToken(request.http.headers["authorization"])
      if (bearer !== undefined) {
        const caller = yield* tokens.verifyAccess(bearer).pipe(Effect.option)
        if (Option.isNone(caller)) {
          return oauthError("invalid_token", "the bearer token is not valid", 401, { "www-authenticate": "Bearer error=\"invalid_token\"" })
        }
      } else {
        yield* authenticated(request, form)
      }
      const subject = form.get("token")
      if (subject === null || subject === "") return oauthError("invalid_request", "token is missing")
      return json(yield* tokens.introspect(subject))
    }).pipe(Effect.catchIf((e): e is HttpServerResponse.HttpServerResponse => HttpServerResponse.isServerResponse(e), Effect.succeed))

  // POST /auth/revoke (RFC 7009): the client revokes a token of its own; 200 whatever the token was.
  const revoke: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return oauthError("invalid_request", "the revocation endpoint takes POST", 405, { allow: "POST" })
      const form = yield* formOf(request.http)
      if (typeof form === "string") return oauthError("invalid_request", form)
      const client = yield* authenticated(request, form, "revocation")
      const subject = form.get("token")
      if (subject === null || subject === "") return oauthError("invalid_request", "token is missing")
      yield* tokens.revoke(subject, client.clientId)
      yield* audit.record({ kind: "revocation", outcome: "success", known: authenticatedClient(client), client: client.clientId, details: { token_type_hint: tokenTypeHint(form) } })
      return HttpServerResponse.empty({ status: 200, headers: noStore })
    }).pipe(Effect.catchIf((e): e is HttpServerResponse.HttpServerResponse => HttpServerResponse.isServerResponse(e), Effect.succeed))

  // POST /auth/launch: the EHR creates a launch context (with the DCR token, the administrator's credential).
  const launch: RootHandler<unknown, AuthEnv> = (request) =>
    Effect.gen(function*() {
      if (request.http.method !== "POST") return oauthError("invalid_request", "launches are created with POST", 405, { allow: "POST" })
      const bearer = bearerToken(request.http.headers["authorization"])
      if (bearer === undefined || !sameSecret(bearer, Redacted.value(settings.dcrToken))) {
        yield* audit.record({ kind: "launch", outcome: "refused", known: false, reason: `invalid_token: ${bearer === undefined ? "no" : "a wrong"} registration token` })
        return oauthError("invalid_token", "creating a launch needs the registration token as a bearer token", 401, { "www-authenticate": "Bearer error=\"invalid_token\"" })
      }
      const text = yield* request.http.text.pipe(Effect.orElseSucceed(() => ""))
      let body: Record<string, unknown> = {}
      try {
        const parsed: unknown = text.trim() === "" ? {} : JSON.parse(text)
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object")
        body = parsed as Record<string, unknown>
      } catch {
        return oauthError("invalid_request", "the body must be a JSON object such as {\"patient\": \"123\", \"encounter\": \"456\"}")
      }
      const field = (name: string, fallback: string | undefined) => {
        const value = body[name]
        return typeof value === "string" && /^[A-Za-z0-9\-.]{1,64}$/.test(value) ? value : value === undefined ? fallback : null
      }
      const patient = field("patient", settings.demoPatient)
      const encounter = field("encounter", settings.demoEncounter)
      if (patient === null || encounter === null) return oauthError("invalid_request", "patient and encounter must be resource ids")
      const created = yield* authorizations.createLaunch({ patient, encounter })
      yield* audit.record({ kind: "launch", outcome: "success", known: true, patient, encounter })
      return json({ launch: created.launch, expires_in: created.expiresIn, iss: urls.fhirBase, ...(patient === undefined ? {} : { patient }), ...(encounter === undefined ? {} : { encounter }) }, 201)
    })

  const jwks: RootHandler<unknown, AuthEnv> = () => Effect.map(keys.jwks, (document) => HttpServerResponse.unsafeJson(document, { headers: { "cache-control": "max-age=300" } }))

  const discovery = (document: unknown): RootHandler<unknown, AuthEnv> => () =>
    Effect.succeed(HttpServerResponse.unsafeJson(document, { headers: { "cache-control": "max-age=300", "access-control-allow-origin": "*" } }))

  const handlers: Record<string, RootHandler<unknown, AuthEnv>> = {
    "/auth/authorize": authorize,
    "/auth/login": login,
    "/auth/login/callback": loginCallback,
    "/auth/picker": pickerStep,
    "/auth/consent": consent,
    "/auth/token": token,
    "/auth/introspect": introspect,
    "/auth/revoke": revoke,
    "/auth/jwks": jwks,
    "/auth/launch": launch,
    "/.well-known/smart-configuration": discovery(smartConfiguration(urls)),
    "/.well-known/openid-configuration": discovery(openidConfiguration(urls)),
    "/fhir/.well-known/smart-configuration": discovery(smartConfiguration(urls))
  }
  return handlers
}
