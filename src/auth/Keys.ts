/**
 * The authorization server's signing keys: RS256 key pairs (RFC 7518 3.3) kept in `svc_auth_keys` as JWKs,
 * named by their RFC 7638 thumbprint, published as a JWK Set (RFC 7517 5) at `/auth/jwks` for whoever
 * verifies svc's tokens (SMART App Launch 2.2: the id_token's signature, a gateway reading access tokens).
 *
 * The newest key not retired signs. A rotation retires every key and adds a new one; a retired key still
 * verifies until no token it signed can be valid, then it is deleted (on the next rotation or start). Servers
 * sharing the database read the same keys: the first start makes one (servers starting at once take turns
 * in the transaction that adds it, and only the first adds one; should two keys ever be usable, every server
 * signs with the newest, ties broken by kid). A kid this server has not read yet sends it back to the table, at
 * most once per `unknownKidEvery`, since another server may have rotated; and it reads the table again
 * every `reloadEvery` on its own, so it signs with another server's new key soon after a rotation there.
 * A retired key is therefore kept for the longest token lifetime plus `reloadEvery`.
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { calculateJwkThumbprint, type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from "jose"
import { Database } from "../db/Database.ts"
import { causeText } from "../db/errors.ts"
import { Writer } from "../db/Writer.ts"

export const signingAlgorithm = "RS256"

/** Postgres advisory lock taken by the transactions that add keys ("svckey" in ASCII). */
const keysLockKey = 0x7376636b6579

/** The signing keys could not be read, made or stored. */
export class KeyStoreError extends Schema.TaggedError<KeyStoreError>()("KeyStoreError", {
  reason: Schema.String
}) {
  override get message(): string {
    return `the signing keys could not be read or stored: ${this.reason}`
  }
}

/** The key that signs now. */
export interface SigningKey {
  readonly kid: string
  readonly alg: typeof signingAlgorithm
  readonly privateKey: CryptoKey
}

/** A public key as the JWK Set publishes it. */
export interface PublicJwk {
  readonly kty: "RSA"
  readonly kid: string
  readonly alg: typeof signingAlgorithm
  readonly use: "sig"
  readonly n: string
  readonly e: string
}

/** The JWK Set document (RFC 7517 5). */
export interface JwkSet {
  readonly keys: ReadonlyArray<PublicJwk>
}

export interface KeyOptions {
  /** The longest lifetime of a token these keys sign (access and id tokens): 1 hour by default. */
  readonly maxTokenLifetime?: Duration.DurationInput
  /** How long the keys read are used before `current` and `jwks` read the table again: 1 minute. */
  readonly reloadEvery?: Duration.DurationInput
  /** An unknown kid reads the table at most once per this: 5 seconds. */
  readonly unknownKidEvery?: Duration.DurationInput
}

export class SigningKeys extends Context.Tag("svc/auth/SigningKeys")<SigningKeys, {
  /** The key that signs now (the newest not retired). */
  readonly current: Effect.Effect<SigningKey>
  /** The public keys of every key that still verifies, newest first. */
  readonly jwks: Effect.Effect<JwkSet>
  /** The public key named `kid`, if it still verifies; an unknown kid may read the table again (see above). */
  readonly keyFor: (kid: string) => Effect.Effect<CryptoKey | undefined>
  /** Retires the keys in use and signs with a new one from now on; returns it. */
  readonly rotate: Effect.Effect<SigningKey, KeyStoreError>
  /**
   * Rotates when no key in use was made within `olderThan` (true when it did): what the servers of a fleet
   * run on a schedule, so that one of them renews an old key and the others find the new one.
   */
  readonly renew: (olderThan: Duration.DurationInput) => Effect.Effect<boolean, KeyStoreError>
  /** The longest token lifetime the keys are kept for after retirement (KeyOptions.maxTokenLifetime). */
  readonly maxTokenLifetime: Duration.Duration
}>() {}

interface KeyRow {
  readonly kid: string
  readonly alg: string
  readonly private_jwk: string
  readonly public_jwk: string
  readonly created_at: number | string
  readonly retired_at: number | string | null
}

/** The keys as read from the table. */
interface Loaded {
  readonly signing: SigningKey
  readonly verifying: ReadonlyMap<string, CryptoKey>
  readonly jwks: JwkSet
  /** When they were read (clock millis). */
  readonly at: number
}

/** A new RS256 key pair as the table stores it. */
const newKey = Effect.promise(async () => {
  const pair = await generateKeyPair(signingAlgorithm, { extractable: true })
  const { kty, n, e } = await exportJWK(pair.publicKey)
  if (kty !== "RSA" || n === undefined || e === undefined) throw new Error("the generated key is not an RSA key")
  const kid = await calculateJwkThumbprint({ kty, n, e })
  const publicJwk: PublicJwk = { kty: "RSA", kid, alg: signingAlgorithm, use: "sig", n, e }
  const privateJwk: JWK = { ...(await exportJWK(pair.privateKey)), kid, alg: signingAlgorithm, use: "sig" }
  return { kid, publicJwk, privateJwk }
})

const importKey = async (jwk: JWK): Promise<CryptoKey> => {
  const key = await importJWK(jwk, signingAlgorithm)
  if (key instanceof Uint8Array) throw new Error("a signing key is not an RSA key")
  return key
}

/** A storage failure (SqlError, LeaseLost) in the words of this module. */
const storeError = (error: unknown): KeyStoreError =>
  error instanceof KeyStoreError ? error : new KeyStoreError({ reason: causeText(error) })

export const make = (options: KeyOptions = {}) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const maxTokenLifetime = Duration.decode(options.maxTokenLifetime ?? "1 hour")
    const reloadEveryMs = Duration.toMillis(options.reloadEvery ?? "1 minute")
    const unknownKidEveryMs = Duration.toMillis(options.unknownKidEvery ?? "5 seconds")
    /** A retired key verifies, and is kept, this long after its retirement. */
    const keepRetiredMs = Duration.toMillis(maxTokenLifetime) + reloadEveryMs
    // Imported once per process: a reload only imports keys it has not seen.
    const imported = new Map<string, CryptoKey>()

    const imports = (kid: string, jwkText: string) =>
      Effect.suspend(() => {
        const known = imported.get(kid)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.tryPromise({
          try: () => importKey(JSON.parse(jwkText) as JWK),
          catch: (error) => new KeyStoreError({ reason: `key ${kid} cannot be read: ${causeText(error)}` })
        }).pipe(Effect.tap((key) => Effect.sync(() => void imported.set(kid, key))))
      })

    const readRows = db.withReader((sql) =>
      sql<KeyRow>`SELECT kid, alg, private_jwk, public_jwk, created_at, retired_at FROM svc_auth_keys
        ORDER BY created_at DESC, kid DESC`
    )

    /** The keys that verify at `now` and the one that signs; undefined when none may sign. */
    const fromRows = (rows: ReadonlyArray<KeyRow>, now: number) =>
      Effect.gen(function*() {
        const usable = rows.filter((row) => row.alg === signingAlgorithm && row.retired_at === null)
        const retired = rows
          .filter((row) => row.alg === signingAlgorithm && row.retired_at !== null && Number(row.retired_at) >= now - keepRetiredMs)
          .sort((a, b) => Number(b.retired_at) - Number(a.retired_at))
        // The rows come newest first, ties by kid: every server picks the same one.
        const newest = usable[0]
        const kept = [...usable, ...retired]
        if (newest === undefined) return undefined
        const verifying = new Map<string, CryptoKey>()
        const keys: Array<PublicJwk> = []
        for (const row of kept) {
          verifying.set(row.kid, yield* imports(row.kid, row.public_jwk))
          const { e, n } = JSON.parse(row.public_jwk) as PublicJwk
          keys.push({ kty: "RSA", kid: row.kid, alg: signingAlgorithm, use: "sig", n, e })
        }
        const privateKey = yield* imports(`${newest.kid}/private`, newest.private_jwk)
        const loaded: Loaded = { signing: { kid: newest.kid, alg: signingAlgorithm, privateKey }, verifying, jwks: { keys }, at: now }
        return loaded
      })

    /**
     * One transaction: deletes the keys retired long enough ago, and with `fresh`, adds it, retiring the others
     * first (`rotate`) or only when no key may sign (`ensure`). On Postgres it holds a lock for the
     * transaction, so that servers doing this at once take turns and each sees what the other did.
     */
    const store = (now: number, fresh?: { readonly key: Effect.Effect.Success<typeof newKey>; readonly mode: "rotate" | "ensure" | { readonly renewBefore: number } }) =>
      writer.commit(() =>
        Effect.gen(function*() {
          const sql = db.writer
          if (db.dialect === "pg") yield* sql`SELECT pg_advisory_xact_lock(${keysLockKey})`
          let added = false
          if (fresh !== undefined) {
            const mode = fresh.mode
            // Renewal: only when no signing key was made after `renewBefore` (another server may just have renewed).
            const renew = typeof mode === "object"
              ? (yield* sql`SELECT kid FROM svc_auth_keys WHERE retired_at IS NULL AND created_at >= ${mode.renewBefore}`).length === 0
              : false
            if (mode === "rotate" || renew) yield* sql`UPDATE svc_auth_keys SET retired_at = ${now} WHERE retired_at IS NULL`
            const usable = mode === "rotate" || renew
              ? []
              : yield* sql`SELECT kid FROM svc_auth_keys WHERE retired_at IS NULL`
            if (usable.length === 0) {
              const inserted = yield* sql<{ kid: string }>`INSERT INTO svc_auth_keys ${
                sql.insert({
                  kid: fresh.key.kid,
                  alg: signingAlgorithm,
                  private_jwk: JSON.stringify(fresh.key.privateJwk),
                  public_jwk: JSON.stringify(fresh.key.publicJwk),
                  created_at: now,
                  retired_at: null
                })
              } ON CONFLICT (kid) DO NOTHING RETURNING kid`
              added = inserted.length > 0
            }
          }
          const deleted = yield* sql<{ kid: string }>`DELETE FROM svc_auth_keys
            WHERE retired_at IS NOT NULL AND retired_at < ${now - keepRetiredMs} RETURNING kid`
          return { added, deleted: deleted.length }
        })
      ).pipe(Effect.map(({ value }) => value))

    /** Reads the keys; when none may sign, makes one first (unless another server just did). */
    const load = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const loaded = yield* fromRows(yield* readRows, now)
      if (loaded !== undefined) return loaded
      const key = yield* newKey
      const { added } = yield* store(now, { key, mode: "ensure" })
      if (added) yield* Effect.logInfo("signing key made", { kid: key.kid })
      const after = yield* fromRows(yield* readRows, now)
      if (after === undefined) return yield* new KeyStoreError({ reason: "no signing key is usable after making one" })
      return after
    }).pipe(Effect.mapError(storeError))

    // Start: forget keys no token can need any more, then read (or make) the keys.
    const { deleted } = yield* store(yield* Clock.currentTimeMillis).pipe(Effect.mapError(storeError))
    if (deleted > 0) yield* Effect.logInfo("retired signing keys deleted", { count: deleted })
    let state: Loaded = yield* load
    let unknownKidReadAt = Number.NEGATIVE_INFINITY

    const reload = Effect.tap(load, (loaded) => Effect.sync(() => void (state = loaded)))

    /** The keys, read again when older than `reloadEvery`; a failed read keeps the last ones (and says so). */
    const fresh: Effect.Effect<Loaded> = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      now - state.at < reloadEveryMs
        ? Effect.succeed(state)
        : reload.pipe(
          Effect.catchAll((error) =>
            Effect.as(Effect.logWarning("signing keys could not be read again; the last ones stay in use", { error: error.message }), state)
          )
        ))

    const keyFor = (kid: string): Effect.Effect<CryptoKey | undefined> =>
      Effect.suspend(() => {
        const known = state.verifying.get(kid)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.flatMap(Clock.currentTimeMillis, (now) => {
          if (now - unknownKidReadAt < unknownKidEveryMs) return Effect.succeed(undefined)
          unknownKidReadAt = now
          return reload.pipe(
            Effect.map((loaded) => loaded.verifying.get(kid)),
            Effect.catchAll((error) =>
              Effect.as(Effect.logWarning("signing keys could not be read again for an unknown kid", { error: error.message }), undefined)
            )
          )
        })
      })

    const rotate = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const made = yield* newKey
      const { deleted } = yield* store(now, { key: made, mode: "rotate" })
      const loaded = yield* reload
      yield* Effect.logInfo("signing keys rotated", { kid: made.kid, deleted })
      return loaded.signing
    }).pipe(Effect.mapError(storeError))

    const renew = (olderThan: Duration.DurationInput) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const made = yield* newKey
        const { added, deleted } = yield* store(now, { key: made, mode: { renewBefore: now - Duration.toMillis(olderThan) } })
        if (!added) return false
        yield* reload
        yield* Effect.logInfo("signing key renewed", { kid: made.kid, deleted })
        return true
      }).pipe(Effect.mapError(storeError))

    return SigningKeys.of({
      renew,
      current: Effect.map(fresh, (loaded) => loaded.signing),
      jwks: Effect.map(fresh, (loaded) => loaded.jwks),
      keyFor,
      rotate,
      maxTokenLifetime
    })
  })

/** The signing keys on the Database, written through the Writer. */
export const layer = (options: KeyOptions = {}): Layer.Layer<SigningKeys, KeyStoreError, Database | Writer> =>
  Layer.effect(SigningKeys, make(options))
