/**
 * The authorization server's short-lived state (SMART App Launch 2.2, "Obtain authorization code"): the
 * pending authorization between `/auth/authorize` and the code (sign-in, patient picker, consent), the
 * authorization codes, and the EHR launch contexts. All of it lives in the database, so that any server of a
 * fleet can take the next step and a restart loses no flow in progress. The random values given out (the
 * pending request's id, codes) are kept as SHA-256 hashes only: a copy of the database redeems nothing.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import type { Grant } from "./Grant.ts"
import { generateSecret, hashSecret } from "./secrets.ts"

/** How long a user has to finish signing in and consenting. */
export const pendingLifetimeMs = 10 * 60_000
/** How long an authorization code may wait to be redeemed (RFC 6749 4.1.2 recommends at most ten minutes). */
export const codeLifetimeMs = 120_000
/** How long a launch id stays valid after the EHR created it. */
export const launchLifetimeMs = 60 * 60_000

/** A random value for a client or a browser: 32 bytes, base64url. */


/** The user signed in for a pending authorization. */
export interface SignedIn {
  readonly subject: string
  readonly fhirUser?: string | undefined
  /** The patient the user is (a Patient-bound user, `patient_from_fhir_user`): no picker. */
  readonly patient?: string | undefined
  readonly name?: string | undefined
  /** Seconds since the epoch. */
  readonly authTime: number
}

/** An authorization request as `/auth/authorize` accepted it, and how far the user has come. */
export interface Pending {
  readonly clientId: string
  readonly redirectUri: string
  /** The scopes asked for. */
  readonly scopes: ReadonlyArray<string>
  readonly state: string | undefined
  readonly codeChallenge: string
  readonly nonce: string | undefined
  /** The launch context of an EHR launch (the `launch` parameter's). */
  readonly launch: LaunchContext | undefined
  /** A value each form of the flow carries back (`csrf`). */
  readonly csrf: string
  /** The hash of the cookie that binds the flow to the browser that began it. */
  readonly browser: string
  readonly user?: SignedIn | undefined
  /** The patient chosen in the picker. */
  readonly patient?: string | undefined
  /** The upstream sign-in's transaction (OpenID Connect), kept until its callback. */
  readonly upstream?: unknown
}

/** What an EHR launch gives the app (SMART App Launch 2.2, "Launch context"). */
export interface LaunchContext {
  readonly patient?: string | undefined
  readonly encounter?: string | undefined
}

/** What an authorization code stands for: the grant, and what the token request must repeat. */
export interface CodeGrant {
  readonly grant: Grant
  readonly redirectUri: string
  readonly codeChallenge: string
}

export class Authorizations extends Context.Tag("svc/auth/Authorizations")<Authorizations, {
  /** Stores a new pending authorization; its id is given to the browser. */
  readonly begin: (pending: Pending) => Effect.Effect<string, unknown>
  /** The pending authorization of `id`, when it exists and has not expired. */
  readonly pending: (id: string) => Effect.Effect<Pending | undefined, unknown>
  readonly update: (id: string, pending: Pending) => Effect.Effect<void, unknown>
  readonly end: (id: string) => Effect.Effect<void, unknown>
  /** Ends the pending authorization `id` with a new code for `grant`. */
  readonly issueCode: (id: string, grant: CodeGrant) => Effect.Effect<string, unknown>
  /** The grant of `code`, once: the code is gone after this, redeemed or not. Undefined when unknown or expired. */
  readonly redeemCode: (code: string) => Effect.Effect<CodeGrant | undefined, unknown>
  /** Stores an EHR launch context and gives its launch id. */
  readonly createLaunch: (context: LaunchContext) => Effect.Effect<{ readonly launch: string; readonly expiresIn: number }, unknown>
  readonly launch: (id: string) => Effect.Effect<LaunchContext | undefined, unknown>
}>() {}

const parse = <A>(text: unknown): A | undefined => {
  try {
    return JSON.parse(String(text)) as A
  } catch {
    return undefined
  }
}

export const make = Effect.gen(function*() {
  const db = yield* Database
  const writer = yield* Writer
  const sql = db.writer
  const commit = <A, E>(effect: Effect.Effect<A, E>) => Effect.map(writer.commit(() => effect), (result) => result.value)

  const begin = (pending: Pending) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const id = generateSecret()
      yield* commit(Effect.gen(function*() {
        yield* sql`DELETE FROM svc_auth_pending WHERE expires_at < ${now}`
        yield* sql`INSERT INTO svc_auth_pending (id_hash, state, expires_at) VALUES (${hashSecret(id)}, ${JSON.stringify(pending)}, ${now + pendingLifetimeMs})`
      }))
      return id
    })

  const pending = (id: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* db.withReader((reader) =>
        reader<{ state: string; expires_at: number | string }>`SELECT state, expires_at FROM svc_auth_pending WHERE id_hash = ${hashSecret(id)}`
      )
      const row = rows[0]
      return row === undefined || Number(row.expires_at) < now ? undefined : parse<Pending>(row.state)
    })

  const update = (id: string, next: Pending) =>
    commit(sql`UPDATE svc_auth_pending SET state = ${JSON.stringify(next)} WHERE id_hash = ${hashSecret(id)}`).pipe(Effect.asVoid)

  const end = (id: string) => commit(sql`DELETE FROM svc_auth_pending WHERE id_hash = ${hashSecret(id)}`).pipe(Effect.asVoid)

  const issueCode = (id: string, grant: CodeGrant) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const code = generateSecret()
      yield* commit(Effect.gen(function*() {
        yield* sql`DELETE FROM svc_auth_pending WHERE id_hash = ${hashSecret(id)}`
        yield* sql`DELETE FROM svc_auth_codes WHERE expires_at < ${now}`
        yield* sql`INSERT INTO svc_auth_codes (code_hash, grant_json, expires_at) VALUES (${hashSecret(code)}, ${JSON.stringify(grant)}, ${now + codeLifetimeMs})`
      }))
      return code
    })

  const redeemCode = (code: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const hash = hashSecret(code)
      const row = yield* commit(Effect.gen(function*() {
        const rows = yield* sql<{ grant_json: string; expires_at: number | string }>`SELECT grant_json, expires_at FROM svc_auth_codes WHERE code_hash = ${hash}`
        if (rows.length > 0) yield* sql`DELETE FROM svc_auth_codes WHERE code_hash = ${hash}`
        return rows[0]
      }))
      return row === undefined || Number(row.expires_at) < now ? undefined : parse<CodeGrant>(row.grant_json)
    })

  const createLaunch = (context: LaunchContext) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const launch = generateSecret()
      yield* commit(Effect.gen(function*() {
        yield* sql`DELETE FROM svc_auth_launches WHERE expires_at < ${now}`
        yield* sql`INSERT INTO svc_auth_launches (launch_id, context, expires_at) VALUES (${launch}, ${JSON.stringify(context)}, ${now + launchLifetimeMs})`
      }))
      return { launch, expiresIn: launchLifetimeMs / 1000 }
    })

  const launch = (id: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* db.withReader((reader) =>
        reader<{ context: string; expires_at: number | string }>`SELECT context, expires_at FROM svc_auth_launches WHERE launch_id = ${id}`
      )
      const row = rows[0]
      return row === undefined || Number(row.expires_at) < now ? undefined : parse<LaunchContext>(row.context)
    })

  return Authorizations.of({ begin, pending, update, end, issueCode, redeemCode, createLaunch, launch })
})

export const layer = Layer.effect(Authorizations, make)
