/**
 * The clients of the authorization server (SMART App Launch 2.2, "Registering a SMART App"; RFC 7591): those
 * registered through `POST /auth/register` and kept in `svc_auth_clients`, and one built-in confidential
 * client, `svc-confidential`, whose secret is the configured (or generated) confidential secret.
 *
 * - Registration (RFC 7591, 3) needs the DCR token as a Bearer credential; the metadata rules are in
 *   clientMetadata.ts. A client of `client_secret_basic` or `client_secret_post` gets a generated secret in
 *   the response, once: only its SHA-256 is stored.
 * - Client authentication at the token, introspection and revocation endpoints (RFC 6749, 2.3): the method the
 *   client registered and no other, one method per request. `client_secret_basic` (RFC 6749, 2.3.1, id and
 *   secret form-urlencoded before base64), `client_secret_post`, `private_key_jwt` (clientAssertion.ts, with
 *   each `jti` recorded in `svc_auth_assertions` until the assertion expires, so that a replay is refused),
 *   `none` for a public client (only its `client_id`: the caller then insists on PKCE).
 * - Redirect URIs match a registered one exactly, except that the port of a registered http loopback IP URI
 *   may differ (RFC 8252, 7.3). The built-in client may redirect to any http(s) URI on a loopback host
 *   (127.0.0.1, [::1], localhost, any port) or on the server's own origin.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Layer, Redacted, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Database } from "../db/Database.ts"
import { controlCharacter } from "../db/text.ts"
import { Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import { assertionType, makeKeySets, peekAssertion, verifyAssertion } from "./clientAssertion.ts"
import {
  type AuthMethod,
  type ClientMetadata,
  grantTypes,
  InvalidClientMetadata,
  isLoopbackHost,
  readMetadata,
  secretMethods
} from "./clientMetadata.ts"
import { jsonResponse, oauthError } from "./oauthError.ts"
import { bearerToken, generateSecret, hashSecret, matchesHash, sameSecret } from "./secrets.ts"
import { none as noSecurityEvents, type SecurityEvents } from "../governance/audit/SecurityEvents.ts"

export interface ClientSettings {
  /** The Bearer token `POST /auth/register` requires (`SVC_SMART_DCR_TOKEN`, or generated at start). */
  readonly dcrToken: Redacted.Redacted<string>
  /** The secret of `svc-confidential` (`SVC_SMART_CONFIDENTIAL_SECRET`, or generated at start). */
  readonly confidentialSecret: Redacted.Redacted<string>
  /** The absolute URL of `/auth/token`: the `aud` a client assertion must name. */
  readonly tokenEndpoint: string
  /** The server's public origin (`server.public_url`): the built-in client may redirect there. */
  readonly publicOrigin: string
  /** Where registrations and refused ones are recorded (the audit trail; docs/governance.md); nothing without it. */
  readonly audit?: SecurityEvents["Type"] | undefined
}

export const builtInClientId = "svc-confidential"

export interface Client {
  readonly clientId: string
  readonly metadata: ClientMetadata
  /** The authentication methods the client may use: the one it registered (both secret methods built in). */
  readonly authMethods: ReadonlyArray<AuthMethod>
  readonly builtIn: boolean
  /** When it was registered, ms since the epoch (0 for the built-in client). */
  readonly createdAt: number
}

/** A client that proved who it is, and how. */
export interface AuthenticatedClient {
  readonly client: Client
  readonly method: AuthMethod
}

/** The registration response (RFC 7591, 3.2.1): the metadata as stored, the id, and any secret, once. */
export type Registration = ClientMetadata & {
  readonly client_id: string
  readonly client_id_issued_at: number
  readonly client_secret?: string
  readonly client_secret_expires_at?: number
}

/** Client authentication failed (RFC 6749, 5.2 `invalid_client`): answered 401 by `clientAuthFailedResponse`. */
export class ClientAuthFailed extends Schema.TaggedError<ClientAuthFailed>()("ClientAuthFailed", {
  error: Schema.Literal("invalid_client"),
  description: Schema.String,
  /** Whether the client tried HTTP Basic: the 401 then carries `WWW-Authenticate: Basic`. */
  basic: Schema.Boolean
}) {
  override get message(): string {
    return `${this.error}: ${this.description}`
  }
}

/** The 401 of a failed client authentication (RFC 6749, 5.2). */
export const clientAuthFailedResponse = (failure: ClientAuthFailed) =>
  oauthError(401, failure.error, failure.description, failure.basic ? { "www-authenticate": 'Basic realm="svc"' } : {})

/** Request headers as either Node or the platform gives them (lower-case names). */
export type RequestHeaders = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export class Clients extends Context.Tag("svc/auth/Clients")<Clients, {
  /** Registers a client from the metadata of a registration request (parsed JSON). */
  readonly register: (body: unknown) => Effect.Effect<Registration, InvalidClientMetadata | SqlError | LeaseLost>
  /** The client with this id, built-in or registered. */
  readonly find: (clientId: string) => Effect.Effect<Client | undefined, SqlError>
  /** Client authentication of a token, introspection or revocation request. */
  readonly authenticate: (input: {
    readonly headers: RequestHeaders
    readonly form: URLSearchParams
  }) => Effect.Effect<AuthenticatedClient, ClientAuthFailed | SqlError | LeaseLost>
  /** Whether `client` may be sent back to `uri`. */
  readonly redirectAllowed: (client: Client, uri: string) => boolean
  /** `POST /auth/register`, for the root route table. */
  readonly registerHandler: RootHandler
}>() {}

/** The largest registration body read. */
const maxBodyBytes = 65_536

/** Expired assertion ids are deleted at most this often. */
const purgeEveryMs = 60_000

const headerOf = (headers: RequestHeaders, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/** `application/x-www-form-urlencoded` decoding of one part (RFC 6749, 2.3.1 and Appendix B). */
const formDecode = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "))
  } catch {
    return undefined
  }
}

/** The client id and secret of an `Authorization: Basic` header, or why it cannot be read. */
export const basicCredentials = (header: string): { readonly id: string; readonly secret: string } | string => {
  const match = /^basic +([A-Za-z0-9+/]+={0,2})\s*$/i.exec(header)
  if (match === null) return "Authorization: Basic must carry base64 of client_id:client_secret"
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  if (colon === -1) return "Authorization: Basic must carry base64 of client_id:client_secret"
  const id = formDecode(decoded.slice(0, colon))
  const secret = formDecode(decoded.slice(colon + 1))
  if (id === undefined || secret === undefined || id === "") {
    return "Authorization: Basic must carry client_id and client_secret, each form-urlencoded (RFC 6749, 2.3.1)"
  }
  return { id, secret }
}

/** A registered http loopback IP URI without its port (RFC 8252, 7.3), or undefined for any other URI. */
const loopbackWithoutPort = (uri: string): string | undefined => {
  const match = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::\d{1,5})?([/?][^#]*)?$/.exec(uri)
  return match === null ? undefined : `http://${match[1]}${match[2] ?? ""}`
}

const builtInMetadata: ClientMetadata = {
  redirect_uris: [],
  token_endpoint_auth_method: "client_secret_basic",
  grant_types: grantTypes,
  response_types: ["code"],
  client_name: "svc built-in confidential client"
}

interface Stored {
  readonly client: Client
  readonly secretHash: string | null
}

export const make = (settings: ClientSettings) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const keySets = makeKeySets()
    const publicOrigin = new URL(settings.publicOrigin).origin
    const builtIn: Client = { clientId: builtInClientId, metadata: builtInMetadata, authMethods: secretMethods, builtIn: true, createdAt: 0 }
    let lastPurge = 0

    const load = (clientId: string): Effect.Effect<Stored | undefined, SqlError> => {
      if (clientId === builtInClientId) return Effect.succeed({ client: builtIn, secretHash: null })
      // No client id this server issues holds a control character (and Postgres's text cannot hold U+0000).
      if (controlCharacter.test(clientId)) return Effect.succeed(undefined)
      return db.withReader((sql) =>
        sql<{ client_id: string; metadata: string; secret_hash: string | null; created_at: number | string }>`
          SELECT client_id, metadata, secret_hash, created_at FROM svc_auth_clients WHERE client_id = ${clientId}`
      ).pipe(Effect.map((rows) => {
        const row = rows[0]
        if (row === undefined) return undefined
        const metadata = JSON.parse(row.metadata) as ClientMetadata
        const client: Client = {
          clientId: row.client_id,
          metadata,
          authMethods: [metadata.token_endpoint_auth_method],
          builtIn: false,
          createdAt: Number(row.created_at)
        }
        return { client, secretHash: row.secret_hash }
      }))
    }

    const find = (clientId: string) => Effect.map(load(clientId), (stored) => stored?.client)

    const register = (body: unknown) =>
      Effect.gen(function*() {
        const metadata = yield* readMetadata(body)
        const now = yield* Clock.currentTimeMillis
        const clientId = randomUUID()
        const secret = secretMethods.includes(metadata.token_endpoint_auth_method) ? generateSecret() : undefined
        const secretHash = secret === undefined ? null : hashSecret(secret)
        yield* writer.commit(() =>
          db.writer`INSERT INTO svc_auth_clients (client_id, metadata, secret_hash, created_at)
            VALUES (${clientId}, ${JSON.stringify(metadata)}, ${secretHash}, ${now})`
        )
        const registration: Registration = {
          client_id: clientId,
          client_id_issued_at: Math.floor(now / 1000),
          ...(secret === undefined ? {} : { client_secret: secret, client_secret_expires_at: 0 }),
          ...metadata
        }
        return registration
      })

    /** Records an assertion id; false when it is already recorded and not expired (a replay). */
    const recordJti = (clientId: string, jti: string, expiresAt: number, now: number) =>
      Effect.gen(function*() {
        const purge = now - lastPurge >= purgeEveryMs
        const { value } = yield* writer.commit(() =>
          Effect.gen(function*() {
            const sql = db.writer
            const rows = yield* sql<{ jti: string }>`
              INSERT INTO svc_auth_assertions (client_id, jti, expires_at) VALUES (${clientId}, ${jti}, ${expiresAt})
              ON CONFLICT (client_id, jti) DO UPDATE SET expires_at = excluded.expires_at
              WHERE svc_auth_assertions.expires_at <= ${now}
              RETURNING jti`
            if (purge) yield* sql`DELETE FROM svc_auth_assertions WHERE expires_at <= ${now}`
            return rows.length === 1
          })
        )
        if (purge) lastPurge = now
        return value
      })

    const authenticate = (input: { readonly headers: RequestHeaders; readonly form: URLSearchParams }) =>
      Effect.gen(function*() {
        const authorization = headerOf(input.headers, "authorization")
        const basic = authorization !== undefined && /^basic(\s|$)/i.test(authorization)
        const fail = (description: string) => Effect.fail(new ClientAuthFailed({ error: "invalid_client", description, basic }))
        for (const name of ["client_id", "client_secret", "client_assertion", "client_assertion_type"]) {
          if (input.form.getAll(name).length > 1) return yield* fail(`${name} is given more than once`)
        }
        const formId = input.form.get("client_id") ?? undefined
        const formSecret = input.form.get("client_secret") ?? undefined
        const assertion = input.form.get("client_assertion") ?? undefined
        const assertionTypeGiven = input.form.get("client_assertion_type") ?? undefined
        const asserted = assertion !== undefined || assertionTypeGiven !== undefined
        if ([basic, formSecret !== undefined, asserted].filter(Boolean).length > 1) {
          return yield* fail("more than one client authentication method is used in one request (RFC 6749, 2.3)")
        }

        /** The stored client of `clientId` when it may use `method`. */
        const clientFor = (clientId: string, method: AuthMethod) =>
          Effect.gen(function*() {
            const stored = yield* load(clientId)
            if (stored === undefined) return yield* fail(`client ${clientId} is not known`)
            if (!stored.client.authMethods.includes(method)) {
              return yield* fail(
                method === "none"
                  ? `client ${clientId} must authenticate with ${stored.client.authMethods.join(" or ")}`
                  : `client ${clientId} is registered for ${stored.client.authMethods.join(" or ")}, not ${method}`
              )
            }
            return stored
          })

        const bySecret = (clientId: string, secret: string, method: AuthMethod) =>
          Effect.gen(function*() {
            const stored = yield* clientFor(clientId, method)
            const good = stored.client.builtIn
              ? sameSecret(secret, Redacted.value(settings.confidentialSecret))
              : stored.secretHash !== null && matchesHash(secret, stored.secretHash)
            if (!good) return yield* fail(`the client secret of ${clientId} is wrong`)
            return { client: stored.client, method }
          })

        if (basic) {
          const credentials = basicCredentials(authorization!)
          if (typeof credentials === "string") return yield* fail(credentials)
          if (formId !== undefined && formId !== credentials.id) {
            return yield* fail("client_id in the body is not the one in Authorization: Basic")
          }
          return yield* bySecret(credentials.id, credentials.secret, "client_secret_basic")
        }
        if (formSecret !== undefined) {
          if (formId === undefined) return yield* fail("client_secret_post needs client_id in the body")
          return yield* bySecret(formId, formSecret, "client_secret_post")
        }
        if (asserted) {
          if (assertionTypeGiven !== assertionType) return yield* fail(`client_assertion_type must be ${assertionType}`)
          if (assertion === undefined) return yield* fail("client_assertion is missing")
          const header = peekAssertion(assertion)
          if (typeof header === "string") return yield* fail(header)
          if (formId !== undefined && formId !== header.issuer) return yield* fail("client_id is not the iss of client_assertion")
          const stored = yield* clientFor(header.issuer, "private_key_jwt")
          const now = yield* Clock.currentTimeMillis
          const verified = yield* verifyAssertion(assertion, header, header.issuer, stored.client.metadata, settings.tokenEndpoint, now, keySets).pipe(
            Effect.catchAll(fail)
          )
          if (!(yield* recordJti(header.issuer, verified.jti, verified.exp * 1000, now))) {
            return yield* fail("client_assertion jti was used before: an assertion is good for one request")
          }
          return { client: stored.client, method: "private_key_jwt" as const }
        }
        if (formId === undefined) return yield* fail("no client authentication: send client credentials, a client assertion, or client_id")
        const stored = yield* clientFor(formId, "none")
        return { client: stored.client, method: "none" as const }
      })

    const redirectAllowed = (client: Client, uri: string): boolean => {
      if (uri.includes("#")) return false
      if (!client.builtIn) {
        if (client.metadata.redirect_uris.includes(uri)) return true
        const asked = loopbackWithoutPort(uri)
        return asked !== undefined && client.metadata.redirect_uris.some((registered) => loopbackWithoutPort(registered) === asked)
      }
      let url: URL
      try {
        url = new URL(uri)
      } catch {
        return false
      }
      if (url.username !== "" || url.password !== "" || (url.protocol !== "http:" && url.protocol !== "https:")) return false
      return isLoopbackHost(url.hostname) || url.origin === publicOrigin
    }

    const audit = settings.audit ?? noSecurityEvents
    const refused = (known: boolean, reason: string) => audit.record({ kind: "registration", outcome: "refused", known, reason })

    const registerHandler: RootHandler = (request) =>
      Effect.gen(function*() {
        const http = request.http
        if (http.method !== "POST") {
          return oauthError(405, "invalid_request", `${http.method} is not allowed on /auth/register: POST the client metadata`, { allow: "POST" })
        }
        const token = bearerToken(http.headers.authorization)
        if (token === undefined) {
          yield* refused(false, "invalid_token: no registration token")
          return oauthError(401, "invalid_token", "registration needs the registration token: Authorization: Bearer <token>", {
            "www-authenticate": 'Bearer realm="svc"'
          })
        }
        if (!sameSecret(token, Redacted.value(settings.dcrToken))) {
          yield* refused(false, "invalid_token: a wrong registration token")
          return oauthError(401, "invalid_token", "the registration token is not valid", {
            "www-authenticate": 'Bearer realm="svc", error="invalid_token"'
          })
        }
        if (!/^application\/json\s*(;|$)/i.test(http.headers["content-type"] ?? "")) {
          return oauthError(400, "invalid_client_metadata", "the body must be JSON client metadata (Content-Type: application/json)")
        }
        if (Number(http.headers["content-length"] ?? 0) > maxBodyBytes) {
          return oauthError(413, "invalid_client_metadata", `the body is larger than ${maxBodyBytes} bytes`)
        }
        const text = yield* Effect.either(http.text)
        if (text._tag === "Left" || Buffer.byteLength(text.right) > maxBodyBytes) {
          return oauthError(400, "invalid_client_metadata", `the body could not be read, or is larger than ${maxBodyBytes} bytes`)
        }
        let body: unknown
        try {
          body = JSON.parse(text.right)
        } catch {
          return oauthError(400, "invalid_client_metadata", "the body is not valid JSON")
        }
        const registration = yield* register(body)
        yield* audit.record({
          kind: "registration",
          outcome: "success",
          known: true,
          client: registration.client_id,
          details: {
            token_endpoint_auth_method: registration.token_endpoint_auth_method,
            grant_types: registration.grant_types.join(" "),
            client_name: registration.client_name
          }
        })
        return jsonResponse(201, registration)
      }).pipe(
        Effect.catchTags({
          InvalidClientMetadata: (invalid) =>
            Effect.as(refused(true, `${invalid.error}: ${invalid.description}`), oauthError(400, invalid.error, invalid.description)),
          SqlError: (error) => unavailable(error.message),
          LeaseLost: (error) => unavailable(error.reason)
        })
      )

    return { register, find, authenticate, redirectAllowed, registerHandler }
  })

const unavailable = (reason: string) =>
  Effect.as(
    Effect.logWarning("a client registration could not be stored", { reason }),
    oauthError(503, "temporarily_unavailable", "the registration could not be stored; try again", { "retry-after": "1" })
  )

/** The Clients service on the database and the Writer. */
export const layer = (settings: ClientSettings): Layer.Layer<Clients, never, Database | Writer> => Layer.effect(Clients, make(settings))
