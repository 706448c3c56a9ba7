/**
 * Client metadata of OAuth 2.0 Dynamic Client Registration (RFC 7591, 2) as svc accepts it, read from a
 * registration request into the record it stores. Fields svc does not know are ignored (RFC 7591, 2: "MUST
 * ignore any client metadata sent by the client that it does not understand"); a known field with a value
 * svc cannot honour is refused, with the RFC 7591 (3.2.2) error that names it:
 *
 * - `redirect_uris`: absolute, no fragment (RFC 6749, 3.1.2), https, or http on a loopback address
 *   (127.0.0.1, [::1], localhost: RFC 8252, 7.3 and 8.3). Required (at least one) for `authorization_code`.
 * - `token_endpoint_auth_method`: `none` (a public client: PKCE stands in for a secret),
 *   `client_secret_basic` (the default, RFC 7591, 2), `client_secret_post`, `private_key_jwt` (SMART's
 *   client-confidential-asymmetric).
 * - `grant_types`: `authorization_code` (the default), `refresh_token` (only with `authorization_code`: a
 *   refresh token comes from a code), `client_credentials` (SMART Backend Services: a confidential client only).
 * - `response_types`: `code`, which goes with `authorization_code`.
 * - `jwks` or `jwks_uri`, exactly one, for `private_key_jwt` and only for it. The set holds public keys only,
 *   each with a `kid` unique in the set (SMART, client-confidential-asymmetric), at least one of them usable for
 *   RS384 (RSA, 2048 bits or more) or ES384 (EC on P-384). `jwks_uri` is https, or http on a loopback address.
 * - `client_name`, `scope` (space-separated scope tokens, RFC 6749 3.3), `contacts`, `logo_uri`,
 *   `client_uri`, `software_id`, `software_version`: kept as given.
 */
import { Effect, Schema } from "effect"
import { importJWK, type JWK } from "jose"
import { isLoopbackHost } from "../config/Setting.ts"

/** The hosts of a loopback interface (RFC 8252, 7.3 and 8.3), as `URL.hostname` gives them: the rule of a loopback bind. */
export { isLoopbackHost }

export const authMethods = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"] as const
export type AuthMethod = (typeof authMethods)[number]

export const grantTypes = ["authorization_code", "refresh_token", "client_credentials"] as const
export type GrantType = (typeof grantTypes)[number]

/** The signature algorithms of client assertions (SMART requires servers to take RS384 or ES384). */
export const assertionAlgorithms = ["RS384", "ES384"] as const

/** The methods that authenticate with a shared secret. */
export const secretMethods: ReadonlyArray<AuthMethod> = ["client_secret_basic", "client_secret_post"]

export interface JwkSet {
  readonly keys: ReadonlyArray<JWK>
}

/** A client's metadata as stored and as the registration response repeats it. */
export interface ClientMetadata {
  readonly redirect_uris: ReadonlyArray<string>
  readonly token_endpoint_auth_method: AuthMethod
  readonly grant_types: ReadonlyArray<GrantType>
  readonly response_types: ReadonlyArray<"code">
  readonly client_name?: string
  readonly scope?: string
  readonly jwks?: JwkSet
  readonly jwks_uri?: string
  readonly contacts?: ReadonlyArray<string>
  readonly logo_uri?: string
  readonly client_uri?: string
  readonly software_id?: string
  readonly software_version?: string
}

/** A registration refused (RFC 7591, 3.2.2): answered 400 with `error` and `error_description`. */
export class InvalidClientMetadata extends Schema.TaggedError<InvalidClientMetadata>()("InvalidClientMetadata", {
  error: Schema.Literal("invalid_redirect_uri", "invalid_client_metadata"),
  description: Schema.String
}) {
  override get message(): string {
    return `${this.error}: ${this.description}`
  }
}

const refuse = (description: string) => new InvalidClientMetadata({ error: "invalid_client_metadata", description })
const refuseRedirect = (description: string) => new InvalidClientMetadata({ error: "invalid_redirect_uri", description })

const maxRedirectUris = 20
const maxUriLength = 2000
const maxKeys = 10
const maxText = 200

/** `text` as a URL when it is absolute, without a fragment or credentials; else why not. */
const absoluteUrl = (name: string, text: string): URL | string => {
  if (text.length > maxUriLength) return `${name} is longer than ${maxUriLength} characters`
  if (text.includes("#")) return `${name} ${text} has a fragment, which is not allowed`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return `${name} ${text} is not an absolute URI`
  }
  if (url.username !== "" || url.password !== "") return `${name} ${text} must not hold a user name or password`
  return url
}

/** Why `text` is not a URI svc may fetch or redirect to (https, or http on loopback); undefined when it is. */
export const secureUriProblem = (name: string, text: string): string | undefined => {
  const url = absoluteUrl(name, text)
  if (typeof url === "string") return url
  if (url.protocol === "https:") return undefined
  if (url.protocol === "http:") {
    return isLoopbackHost(url.hostname) ? undefined : `${name} ${text} uses http on a host that is not loopback: use https (RFC 8252, 8.3)`
  }
  return `${name} ${text} has scheme ${url.protocol.slice(0, -1)}: use https, or http on a loopback address`
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** An optional text field: absent (or null), or a non-empty string of at most `max` characters. */
const optionalText = (body: Record<string, unknown>, name: string, max = maxText): string | undefined | InvalidClientMetadata => {
  const value = body[name]
  if (value === undefined || value === null) return undefined
  if (typeof value !== "string" || value === "") return refuse(`${name} must be a non-empty string`)
  if (value.length > max) return refuse(`${name} is longer than ${max} characters`)
  return value
}

/** An optional list of strings, each once. */
const optionalList = (body: Record<string, unknown>, name: string, max: number): ReadonlyArray<string> | undefined | InvalidClientMetadata => {
  const value = body[name]
  if (value === undefined || value === null) return undefined
  if (!Array.isArray(value) || value.some((item) => typeof item !== "string" || item === "")) {
    return refuse(`${name} must be an array of non-empty strings`)
  }
  const items = [...new Set(value as Array<string>)]
  if (items.length > max) return refuse(`${name} may hold at most ${max} values`)
  return items
}

/** RFC 6749, 3.3: `scope-token *( SP scope-token )`, `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`. */
const scopePattern = /^[\x21\x23-\x5B\x5D-\x7E]+(?: [\x21\x23-\x5B\x5D-\x7E]+)*$/

/** Members of a JWK that only a private or symmetric key has (RFC 7518, 6.2.2, 6.3.2 and 6.4). */
const privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

/** Whether `jwk` can verify assertions signed with `alg`: its type, curve, size, `alg` and `use` fit. */
const usableFor = (jwk: JWK, alg: (typeof assertionAlgorithms)[number]): Effect.Effect<boolean> => {
  if (jwk.alg !== undefined && jwk.alg !== alg) return Effect.succeed(false)
  if (jwk.use !== undefined && jwk.use !== "sig") return Effect.succeed(false)
  if (alg === "RS384" ? jwk.kty !== "RSA" : jwk.kty !== "EC" || jwk.crv !== "P-384") return Effect.succeed(false)
  return Effect.tryPromise(() => importJWK(jwk, alg)).pipe(
    Effect.map((key) => {
      if (key instanceof Uint8Array || key.type !== "public") return false
      const modulus = (key.algorithm as { readonly modulusLength?: number }).modulusLength
      return alg === "ES384" || (modulus !== undefined && modulus >= 2048)
    }),
    Effect.orElseSucceed(() => false)
  )
}

/** A JWK Set of public keys, at least one usable for RS384 or ES384. */
export const readJwks = (value: unknown): Effect.Effect<JwkSet, InvalidClientMetadata> =>
  Effect.gen(function*() {
    if (!isRecord(value) || !Array.isArray(value.keys)) return yield* refuse("jwks must be a JWK Set: an object with a keys array")
    const keys = value.keys as ReadonlyArray<unknown>
    if (keys.length === 0) return yield* refuse("jwks holds no key")
    if (keys.length > maxKeys) return yield* refuse(`jwks may hold at most ${maxKeys} keys`)
    const kids = new Set<string>()
    let usable = false
    for (const key of keys) {
      if (!isRecord(key) || typeof key.kty !== "string") return yield* refuse("each key of jwks must be a JWK with a kty")
      const secret = privateMembers.find((member) => key[member] !== undefined)
      if (secret !== undefined) {
        return yield* refuse(`jwks holds private or symmetric key material (${secret}): register public keys only`)
      }
      if (typeof key.kid !== "string" || key.kid === "") return yield* refuse("each key of jwks needs a kid")
      if (kids.has(key.kid)) return yield* refuse(`jwks holds two keys with kid ${key.kid}: a kid must be unique in the set`)
      kids.add(key.kid)
      for (const alg of assertionAlgorithms) {
        if (!usable && (yield* usableFor(key as JWK, alg))) usable = true
      }
    }
    if (!usable) {
      return yield* refuse("jwks holds no public key usable for RS384 (RSA, at least 2048 bits) or ES384 (EC on P-384)")
    }
    return { keys: keys as ReadonlyArray<JWK> }
  })

const readRedirectUris = (body: Record<string, unknown>): ReadonlyArray<string> | InvalidClientMetadata => {
  const value = body.redirect_uris
  if (value === undefined || value === null) return []
  if (!Array.isArray(value) || value.some((item) => typeof item !== "string")) {
    return refuseRedirect("redirect_uris must be an array of strings")
  }
  const uris = [...new Set(value as Array<string>)]
  if (uris.length > maxRedirectUris) return refuseRedirect(`redirect_uris may hold at most ${maxRedirectUris} URIs`)
  for (const uri of uris) {
    const problem = secureUriProblem("redirect URI", uri)
    if (problem !== undefined) return refuseRedirect(problem)
  }
  return uris
}

const readGrantTypes = (body: Record<string, unknown>): ReadonlyArray<GrantType> | InvalidClientMetadata => {
  const value = body.grant_types
  if (value === undefined || value === null) return ["authorization_code"]
  if (!Array.isArray(value) || value.length === 0) return refuse("grant_types must be a non-empty array")
  const granted: Array<GrantType> = []
  for (const item of value) {
    const grant = grantTypes.find((known) => known === item)
    if (grant === undefined) return refuse(`grant type ${JSON.stringify(item)} is not supported (supported: ${grantTypes.join(", ")})`)
    if (!granted.includes(grant)) granted.push(grant)
  }
  return granted
}

const readResponseTypes = (body: Record<string, unknown>, grants: ReadonlyArray<GrantType>): ReadonlyArray<"code"> | InvalidClientMetadata => {
  const value = body.response_types
  const code = grants.includes("authorization_code")
  if (value === undefined || value === null) return code ? ["code"] : []
  if (!Array.isArray(value)) return refuse("response_types must be an array")
  for (const item of value) {
    if (item !== "code") return refuse(`response type ${JSON.stringify(item)} is not supported (supported: code)`)
  }
  if (value.length > 0 && !code) return refuse("response type code needs the grant type authorization_code")
  if (value.length === 0 && code) return refuse("grant type authorization_code needs the response type code")
  return value.length === 0 ? [] : ["code"]
}

const check = <A>(value: A | InvalidClientMetadata): Effect.Effect<A, InvalidClientMetadata> =>
  value instanceof InvalidClientMetadata ? Effect.fail(value) : Effect.succeed(value)

/** The metadata of a registration request's body (parsed JSON), or the RFC 7591 error refusing it. */
export const readMetadata = (body: unknown): Effect.Effect<ClientMetadata, InvalidClientMetadata> =>
  Effect.gen(function*() {
    if (!isRecord(body)) return yield* refuse("the body must be a JSON object of client metadata")
    const method = body.token_endpoint_auth_method ?? "client_secret_basic"
    const authMethod = authMethods.find((known) => known === method)
    if (authMethod === undefined) {
      return yield* refuse(`token_endpoint_auth_method ${JSON.stringify(method)} is not supported (supported: ${authMethods.join(", ")})`)
    }
    const grants = yield* check(readGrantTypes(body))
    if (grants.includes("refresh_token") && !grants.includes("authorization_code")) {
      return yield* refuse("grant type refresh_token needs authorization_code: refresh tokens are issued with a code")
    }
    if (grants.includes("client_credentials") && authMethod === "none") {
      return yield* refuse("grant type client_credentials is for confidential clients: use private_key_jwt or a client secret")
    }
    const responseTypes = yield* check(readResponseTypes(body, grants))
    const redirectUris = yield* check(readRedirectUris(body))
    if (grants.includes("authorization_code") && redirectUris.length === 0) {
      return yield* refuseRedirect("grant type authorization_code needs at least one redirect URI in redirect_uris")
    }
    const hasJwks = body.jwks !== undefined && body.jwks !== null
    const jwksUri = yield* check(optionalText(body, "jwks_uri", maxUriLength))
    if (authMethod === "private_key_jwt") {
      if (hasJwks === (jwksUri !== undefined)) return yield* refuse("private_key_jwt needs exactly one of jwks and jwks_uri")
    } else if (hasJwks || jwksUri !== undefined) {
      return yield* refuse("jwks and jwks_uri are only taken with token_endpoint_auth_method private_key_jwt")
    }
    if (jwksUri !== undefined) {
      const problem = secureUriProblem("jwks_uri", jwksUri)
      if (problem !== undefined) return yield* refuse(problem)
    }
    const jwks = hasJwks ? yield* readJwks(body.jwks) : undefined
    const scope = yield* check(optionalText(body, "scope", 4000))
    if (scope !== undefined && !scopePattern.test(scope)) {
      return yield* refuse("scope must be scope tokens separated by single spaces (RFC 6749, 3.3)")
    }
    const uri = (name: string) =>
      Effect.flatMap(check(optionalText(body, name, maxUriLength)), (value) => {
        if (value === undefined) return Effect.succeed(undefined)
        const url = absoluteUrl(name, value)
        if (typeof url === "string") return Effect.fail(refuse(url))
        return url.protocol === "https:" || url.protocol === "http:" ? Effect.succeed(value) : Effect.fail(refuse(`${name} must be an http or https URL`))
      })
    const clientName = yield* check(optionalText(body, "client_name"))
    const contacts = yield* check(optionalList(body, "contacts", 10))
    const logoUri = yield* uri("logo_uri")
    const clientUri = yield* uri("client_uri")
    const softwareId = yield* check(optionalText(body, "software_id"))
    const softwareVersion = yield* check(optionalText(body, "software_version"))
    return {
      redirect_uris: redirectUris,
      token_endpoint_auth_method: authMethod,
      grant_types: grants,
      response_types: responseTypes,
      ...(clientName === undefined ? {} : { client_name: clientName }),
      ...(scope === undefined ? {} : { scope }),
      ...(jwks === undefined ? {} : { jwks }),
      ...(jwksUri === undefined ? {} : { jwks_uri: jwksUri }),
      ...(contacts === undefined ? {} : { contacts }),
      ...(logoUri === undefined ? {} : { logo_uri: logoUri }),
      ...(clientUri === undefined ? {} : { client_uri: clientUri }),
      ...(softwareId === undefined ? {} : { software_id: softwareId }),
      ...(softwareVersion === undefined ? {} : { software_version: softwareVersion })
    }
  })
