/**
 * Client assertions (`private_key_jwt`): RFC 7523 (2.2 and 3) as SMART App Launch 2.2 profiles them
 * (client-confidential-asymmetric.html, "Authenticating to the Token endpoint" and "Signature Verification";
 * backend-services.html). The JWT is signed with RS384 or ES384 (no other algorithm, `none` least of all),
 * names its key by `kid`, has `iss` = `sub` = the client id, `aud` = the token endpoint, a `jti`, and an `exp`
 * in the future but at most five minutes ahead. The key comes from the client's registered `jwks`, or from its
 * `jwks_uri`; a `jku` header is taken only when it is that very URI. Exactly one key of the set may match the
 * `kid` and the algorithm's key type. That the `jti` is new is the caller's check (it needs the database).
 *
 * Key sets behind `jwks_uri` are fetched by jose's `createRemoteJWKSet` and held at most as long as the
 * response's `Cache-Control` allows and never more than five minutes (SMART: the server "SHALL NOT cache a
 * JWKS for longer than the client's cache-control header indicates"); an unknown `kid` fetches the set again
 * at most every thirty seconds, for key rotation. Those times are read from Effect's Clock.
 */
import { Effect } from "effect"
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  type FetchImplementation,
  type JWTVerifyGetKey,
  jwtVerify,
  type RemoteJWKSet
} from "jose"
import { assertionAlgorithms, type ClientMetadata } from "./clientMetadata.ts"

export const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/** SMART: `exp` "SHALL be no more than five minutes in the future". */
export const maxLifetimeSeconds = 300

/** Clocks of clients and server may differ this much (on `exp`'s upper bound and `nbf`). */
export const clockSkewSeconds = 30

/** What an assertion says of itself before its signature is checked: enough to find the client. */
export interface AssertionHeader {
  readonly alg: string
  readonly kid: string
  readonly jku: string | undefined
  /** The `iss` claim: the client the assertion speaks for. */
  readonly issuer: string
}

/** The header and issuer of `jwt`, or why it cannot be a SMART client assertion. */
export const peekAssertion = (jwt: string): AssertionHeader | string => {
  let header: ReturnType<typeof decodeProtectedHeader>
  let claims: ReturnType<typeof decodeJwt>
  try {
    header = decodeProtectedHeader(jwt)
    claims = decodeJwt(jwt)
  } catch {
    return "client_assertion is not a signed JWT (header.payload.signature, base64url)"
  }
  const alg = header.alg
  if (typeof alg !== "string" || !assertionAlgorithms.some((known) => known === alg)) {
    return `client_assertion alg ${JSON.stringify(alg ?? null)} is not accepted: sign with RS384 or ES384`
  }
  if (typeof header.kid !== "string" || header.kid === "") return "client_assertion has no kid header naming its key"
  const typ: unknown = header.typ
  if (typ !== undefined && (typeof typ !== "string" || typ.toUpperCase() !== "JWT")) return `client_assertion typ ${String(typ)} is not JWT`
  if (typeof claims.iss !== "string" || claims.iss === "") return "client_assertion has no iss claim (the client id)"
  const jku: unknown = header.jku
  if (jku !== undefined && typeof jku !== "string") return "client_assertion jku must be a URL"
  return { alg, kid: header.kid, jku, issuer: claims.iss }
}

export interface RemoteKeyOptions {
  /** How long a fetch of a JWK Set may take. */
  readonly timeoutMs: number
  /** The longest a fetched set is used without fetching it again, whatever its Cache-Control says. */
  readonly maxAgeMs: number
  /** The shortest time between two fetches that an unknown `kid` causes. */
  readonly cooldownMs: number
  /** Key sets held at once (one per `jwks_uri`); the oldest is dropped past it. */
  readonly maxSets: number
  /** The largest JWK Set response read. */
  readonly maxBytes: number
}

export const defaultRemoteKeyOptions: RemoteKeyOptions = {
  timeoutMs: 5_000,
  maxAgeMs: 300_000,
  cooldownMs: 30_000,
  maxSets: 1_000,
  maxBytes: 65_536
}

interface RemoteSet {
  readonly set: RemoteJWKSet
  /** Clock time of the last fetch that succeeded, or undefined before the first. */
  fetchedAt: number | undefined
  /** How long the last fetch may be used. */
  usableMs: number
  /** What the response being fetched allows (set by the fetch, taken when it succeeds). */
  allowedMs: number
}

/** How long a response with this Cache-Control may be used, within `maxMs`. */
export const cacheLifetimeMs = (cacheControl: string | null, maxMs: number): number => {
  if (cacheControl === null) return maxMs
  const directives = cacheControl.toLowerCase().split(",").map((directive) => directive.trim())
  if (directives.includes("no-store") || directives.includes("no-cache")) return 0
  const maxAge = directives.find((directive) => directive.startsWith("max-age="))
  if (maxAge === undefined) return maxMs
  const seconds = Number(maxAge.slice("max-age=".length).replace(/"/g, ""))
  return Number.isFinite(seconds) && seconds >= 0 ? Math.min(seconds * 1000, maxMs) : maxMs
}

/** A `jwks_uri` that could not be fetched (unreachable, slow, not 200, not a JWK Set, too large). */
class KeySetUnavailable extends Error {}

/** A getter that fails when more than one key matches (jose would try each; SMART wants exactly one). */
const exactlyOne = (getKey: JWTVerifyGetKey): JWTVerifyGetKey => async (header, token) => {
  try {
    return await getKey(header, token)
  } catch (error) {
    if (error instanceof errors.JWKSMultipleMatchingKeys) throw new errors.JWKSInvalid("more than one key of the client's JWK Set matches the assertion's kid and alg")
    throw error
  }
}

/** The key sets of clients registered with `jwks_uri`, fetched and held as the module's comment says. */
export const makeKeySets = (options: RemoteKeyOptions = defaultRemoteKeyOptions) => {
  const sets = new Map<string, RemoteSet>()

  const setOf = (uri: string): RemoteSet => {
    const held = sets.get(uri)
    if (held !== undefined) return held
    if (sets.size >= options.maxSets) sets.delete(sets.keys().next().value!)
    const fetchLimited: FetchImplementation = async (url, init) => {
      const response = await fetch(url, init)
      entry.allowedMs = cacheLifetimeMs(response.headers.get("cache-control"), options.maxAgeMs)
      if (response.body === null) return response
      const chunks: Array<Uint8Array> = []
      let size = 0
      for await (const chunk of response.body) {
        size += chunk.byteLength
        if (size > options.maxBytes) throw new Error(`the JWK Set at ${uri} is larger than ${options.maxBytes} bytes`)
        chunks.push(chunk)
      }
      return new Response(Buffer.concat(chunks), { status: response.status, headers: response.headers })
    }
    // jose's own timers are off (an infinite age and cooldown): every fetch is decided here, on the Clock.
    const entry: RemoteSet = {
      set: createRemoteJWKSet(new URL(uri), {
        timeoutDuration: options.timeoutMs,
        cacheMaxAge: Number.POSITIVE_INFINITY,
        cooldownDuration: Number.POSITIVE_INFINITY,
        [customFetch]: fetchLimited
      }),
      fetchedAt: undefined,
      usableMs: 0,
      allowedMs: options.maxAgeMs
    }
    sets.set(uri, entry)
    return entry
  }

  const reload = async (entry: RemoteSet, uri: string, now: number) => {
    try {
      await entry.set.reload()
    } catch (error) {
      throw new KeySetUnavailable(
        error instanceof errors.JWKSTimeout
          ? `the client's JWK Set at ${uri} did not answer within ${options.timeoutMs} ms`
          : `the client's JWK Set could not be fetched from ${uri}`
      )
    }
    entry.fetchedAt = now
    entry.usableMs = entry.allowedMs
  }

  /** The key getter of `uri` for a verification at Clock time `now`. */
  const remote = (uri: string, now: number): JWTVerifyGetKey => {
    const entry = setOf(uri)
    const getKey = exactlyOne(entry.set)
    return async (header, token) => {
      if (entry.fetchedAt === undefined || now - entry.fetchedAt >= entry.usableMs) await reload(entry, uri, now)
      try {
        return await getKey(header, token)
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey) || now - entry.fetchedAt! < options.cooldownMs) throw error
        await reload(entry, uri, now)
        return await getKey(header, token)
      }
    }
  }

  /** The key getter of a client's registered keys. */
  const keysOf = (metadata: ClientMetadata, now: number): JWTVerifyGetKey =>
    metadata.jwks !== undefined ? exactlyOne(createLocalJWKSet({ keys: [...metadata.jwks.keys] })) : remote(metadata.jwks_uri ?? "", now)

  return { keysOf, held: () => sets.size }
}

export type KeySets = ReturnType<typeof makeKeySets>

/** What a verified assertion gives: its id and expiry (seconds since the epoch), for the replay check. */
export interface VerifiedAssertion {
  readonly jti: string
  readonly exp: number
}

/** Why jose refused an assertion, in words a client developer can act on. */
const refusal = (error: unknown, audience: string): string => {
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case "aud":
        return `client_assertion aud must be the token endpoint ${audience}`
      case "iss":
      case "sub":
        return "client_assertion iss and sub must both be the client id"
      case "nbf":
        return "client_assertion is not valid yet (nbf)"
      default:
        return `client_assertion claim ${error.claim} ${error.reason === "missing" ? "is missing" : "is not valid"}`
    }
  }
  if (error instanceof errors.JWTExpired) return "client_assertion has expired (exp)"
  if (error instanceof errors.JWSSignatureVerificationFailed) return "client_assertion signature does not verify with the client's key"
  if (error instanceof errors.JWKSNoMatchingKey) return "no key of the client's JWK Set matches the assertion's kid and alg"
  if (error instanceof errors.JWKSInvalid) return error.message
  if (error instanceof KeySetUnavailable) return error.message
  return "client_assertion could not be verified"
}

/**
 * Verifies `jwt`, peeked as `header`, as an assertion of the client `clientId` with `metadata`, at Clock time
 * `now` (ms): the `jku` rule, the signature with the client's key, the claims and the lifetime.
 */
export const verifyAssertion = (
  jwt: string,
  header: AssertionHeader,
  clientId: string,
  metadata: ClientMetadata,
  audience: string,
  now: number,
  keySets: KeySets
): Effect.Effect<VerifiedAssertion, string> =>
  Effect.gen(function*() {
    if (header.jku !== undefined && header.jku !== metadata.jwks_uri) {
      return yield* Effect.fail("client_assertion jku is not the jwks_uri the client registered")
    }
    const { payload } = yield* Effect.tryPromise({
      try: () =>
        jwtVerify(jwt, keySets.keysOf(metadata, now), {
          algorithms: [...assertionAlgorithms],
          issuer: clientId,
          subject: clientId,
          audience,
          requiredClaims: ["exp", "jti"],
          currentDate: new Date(now),
          clockTolerance: clockSkewSeconds
        }),
      catch: (error) => refusal(error, audience)
    })
    const exp = payload.exp!
    const seconds = now / 1000
    if (exp <= seconds) return yield* Effect.fail("client_assertion has expired (exp)")
    if (exp > seconds + maxLifetimeSeconds + clockSkewSeconds) {
      return yield* Effect.fail(`client_assertion exp is more than ${maxLifetimeSeconds / 60} minutes ahead`)
    }
    if (typeof payload.jti !== "string" || payload.jti === "" || payload.jti.length > 255) {
      return yield* Effect.fail("client_assertion jti must be a string of 1 to 255 characters")
    }
    return { jti: payload.jti, exp }
  })
