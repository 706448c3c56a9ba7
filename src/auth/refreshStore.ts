/**
 * Refresh tokens as `svc_auth_refresh` keeps them (RFC 6749 6; OAuth 2.0 Security BCP, RFC 9700 4.14): an
 * opaque random token handed to the client, of which only the SHA-256 is stored, with the grant it renews.
 * Every use rotates it: the token is marked used and a new one of the same family (every token rotated from
 * one authorization) replaces it. A used token presented again means two parties hold the family, one of
 * them a thief: the whole family is revoked.
 */
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import type { Grant } from "./Grant.ts"
import { generateSecret, hashSecret } from "./secrets.ts"

/** A new opaque token: 32 random bytes, base64url (43 characters, no dot: never mistaken for a JWT). */
export const newOpaqueToken = generateSecret

/** What the table stores of a token: its SHA-256, hex. */
export const tokenHash = hashSecret

const OptionalString = Schema.optional(Schema.Union(Schema.String, Schema.Undefined))

/** The grant as `grant_json` holds it. */
const GrantJson = Schema.parseJson(Schema.Struct({
  clientId: Schema.String,
  scopes: Schema.Array(Schema.String),
  subject: OptionalString,
  fhirUser: OptionalString,
  patient: OptionalString,
  encounter: OptionalString,
  needPatientBanner: Schema.optional(Schema.Union(Schema.Boolean, Schema.Undefined)),
  smartStyleUrl: OptionalString,
  authTime: Schema.optional(Schema.Union(Schema.Number, Schema.Undefined)),
  nonce: OptionalString
}))

const encodeGrant = (grant: Grant): string => JSON.stringify(grant)
const decodeGrant = Schema.decodeUnknown(GrantJson)

export interface RefreshRow {
  readonly family: string
  readonly clientId: string
  readonly grant: Grant
  readonly createdAt: number
  /** Null for offline access. */
  readonly expiresAt: number | null
  readonly usedAt: number | null
  readonly revokedAt: number | null
}

interface StoredRow {
  readonly family: string
  readonly client_id: string
  readonly grant_json: string
  readonly created_at: number | string
  readonly expires_at: number | string | null
  readonly used_at: number | string | null
  readonly revoked_at: number | string | null
}

const orNull = (value: number | string | null): number | null => value === null ? null : Number(value)

const rowOf = (row: StoredRow) =>
  Effect.map(decodeGrant(row.grant_json), (grant): RefreshRow => ({
    family: row.family,
    clientId: row.client_id,
    grant,
    createdAt: Number(row.created_at),
    expiresAt: orNull(row.expires_at),
    usedAt: orNull(row.used_at),
    revokedAt: orNull(row.revoked_at)
  }))

const select = (sql: Database["Type"]["writer"], hash: string) =>
  sql<StoredRow>`SELECT family, client_id, grant_json, created_at, expires_at, used_at, revoked_at
    FROM svc_auth_refresh WHERE token_hash = ${hash}`

/** The row of `token`, from a reader; undefined when there is none. */
export const read = (token: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const rows = yield* db.withReader((sql) => select(sql, tokenHash(token)))
    return rows[0] === undefined ? undefined : yield* rowOf(rows[0])
  })

const insert = (sql: Database["Type"]["writer"], token: string, family: string, grant: Grant, now: number, expiresAt: number | null) =>
  sql`INSERT INTO svc_auth_refresh ${
    sql.insert({
      token_hash: tokenHash(token),
      family,
      client_id: grant.clientId,
      grant_json: encodeGrant(grant),
      created_at: now,
      expires_at: expiresAt,
      used_at: null,
      revoked_at: null
    })
  }`

/** Stores a new token of `family` (a new family when undefined) and returns it. */
export const issue = (grant: Grant, now: number, expiresAt: number | null, family: string = randomUUID()) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const token = newOpaqueToken()
    yield* writer.commit(() => insert(db.writer, token, family, grant, now, expiresAt))
    return token
  })

const revokeFamilyWith = (sql: Database["Type"]["writer"], family: string, now: number) =>
  sql`UPDATE svc_auth_refresh SET revoked_at = ${now} WHERE family = ${family} AND revoked_at IS NULL`

/** What a redemption came to. */
export type Redemption =
  | { readonly _tag: "Redeemed"; readonly row: RefreshRow; readonly refreshToken: string }
  | { readonly _tag: "Unknown" }
  | { readonly _tag: "OtherClient" }
  | { readonly _tag: "Revoked" }
  | { readonly _tag: "Expired" }
  /** Used before: its family is now revoked. */
  | { readonly _tag: "Reused"; readonly family: string }
  /** The caller's check of the stored row refused it (a scope not granted): the token stays unused. */
  | { readonly _tag: "Refused"; readonly reason: string }

const outcome = (redemption: Redemption): Redemption => redemption

/**
 * Redeems `token` for `clientId` in one transaction: checks it, marks it used and stores its successor in
 * the same family, with the same grant and expiry. `check` may refuse the row (nothing is then changed).
 * A used token revokes its family; so does losing a race with another redemption of the same token.
 */
export const redeem = (token: string, clientId: string, now: number, check: (row: RefreshRow) => string | undefined) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const hash = tokenHash(token)
    const { value } = yield* writer.commit(() =>
      Effect.gen(function*() {
        const sql = db.writer
        const stored = (yield* select(sql, hash))[0]
        if (stored === undefined) return outcome({ _tag: "Unknown" })
        const row = yield* rowOf(stored)
        if (row.clientId !== clientId) return outcome({ _tag: "OtherClient" })
        if (row.revokedAt !== null) return outcome({ _tag: "Revoked" })
        const reused = Effect.as(revokeFamilyWith(sql, row.family, now), outcome({ _tag: "Reused", family: row.family }))
        if (row.usedAt !== null) return yield* reused
        if (row.expiresAt !== null && row.expiresAt <= now) return outcome({ _tag: "Expired" })
        const refused = check(row)
        if (refused !== undefined) return outcome({ _tag: "Refused", reason: refused })
        const marked = yield* sql`UPDATE svc_auth_refresh SET used_at = ${now}
          WHERE token_hash = ${hash} AND used_at IS NULL AND revoked_at IS NULL RETURNING family`
        // Another redemption of the same token got there first (Postgres, another server).
        if (marked.length === 0) return yield* reused
        const next = newOpaqueToken()
        yield* insert(sql, next, row.family, row.grant, now, row.expiresAt)
        return outcome({ _tag: "Redeemed", row, refreshToken: next })
      })
    )
    return value
  })

/** Revokes the family of `token` when it is `clientId`'s; whether it did. */
export const revokeFamily = (token: string, clientId: string, now: number) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const { value } = yield* writer.commit(() =>
      Effect.gen(function*() {
        const sql = db.writer
        const rows = yield* sql<{ family: string; client_id: string }>`
          SELECT family, client_id FROM svc_auth_refresh WHERE token_hash = ${tokenHash(token)}`
        const row = rows[0]
        if (row === undefined || row.client_id !== clientId) return false
        yield* revokeFamilyWith(sql, row.family, now)
        return true
      })
    )
    return value
  })

/** A used token is kept this long to recognise its reuse; after it, it is simply unknown. */
export const keepUsedMs = 30 * 24 * 3_600_000

/** Deletes the rows no redemption can succeed with or learn from: expired, revoked, used long ago. */
export const purge = (now: number) =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const { value } = yield* writer.commit(() =>
      db.writer<{ family: string }>`DELETE FROM svc_auth_refresh
        WHERE (expires_at IS NOT NULL AND expires_at <= ${now}) OR revoked_at IS NOT NULL
          OR (used_at IS NOT NULL AND used_at < ${now - keepUsedMs})
        RETURNING family`
    )
    return value.length
  })
