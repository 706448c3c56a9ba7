/**
 * The signing keys (src/auth/Keys.ts) on SQLite and Postgres: the first start makes one RS256 key named by
 * its thumbprint, a restart reads it, two servers starting at once sign with the same key, rotation keeps the
 * retired key for verification until its tokens cannot be valid, and a server reads another's rotation.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope, TestClock } from "effect"
import { calculateJwkThumbprint } from "jose"
import { Database } from "../../src/db/Database.ts"
import { backends, freshDatabase } from "../support/backends.ts"
import { openServer, openStore } from "../support/tokenServer.ts"

const start = Date.parse("2026-03-02T09:00:00Z")

/** (kid, retired) of every stored key, newest first. */
const storedKeys = Effect.flatMap(Database, (db) =>
  db.withReader((sql) =>
    sql<{ kid: string; retired_at: number | string | null; private_jwk: string; public_jwk: string }>`
      SELECT kid, retired_at, private_jwk, public_jwk FROM svc_auth_keys ORDER BY created_at DESC, kid DESC`
  )).pipe(Effect.orDie)

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`signing keys on ${backend.kind}`, () => {
    it.scoped("makes one RS256 key at first start, named by its RFC 7638 thumbprint, and publishes only its public half", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        const { keys } = yield* openServer(store)
        const current = yield* keys.current
        const { keys: published } = yield* keys.jwks
        expect(published).toHaveLength(1)
        const jwk = published[0]!
        expect(Object.keys(jwk).sort()).toEqual(["alg", "e", "kid", "kty", "n", "use"])
        expect(jwk).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig", kid: current.kid, e: "AQAB" })
        // 2048 bits: 256 bytes of modulus, 342 characters of base64url.
        expect(jwk.n).toHaveLength(342)
        expect(yield* Effect.promise(() => calculateJwkThumbprint({ kty: jwk.kty, n: jwk.n, e: jwk.e }))).toBe(jwk.kid)
        const rows = yield* storedKeys.pipe(Effect.provide(store))
        expect(rows.map((r) => [r.kid, r.retired_at])).toEqual([[current.kid, null]])
        expect(JSON.parse(rows[0]!.public_jwk)).not.toHaveProperty("d")
        expect(JSON.parse(rows[0]!.private_jwk)).toHaveProperty("d")
      }))

    it.scoped("reads the same key after a restart instead of making another", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const options = yield* freshDatabase(backend.kind)
        const first = yield* Scope.make()
        const before = yield* Effect.gen(function*() {
          const { keys } = yield* openServer(yield* openStore(options))
          return (yield* keys.current).kid
        }).pipe(Scope.extend(first))
        yield* Scope.close(first, Exit.void)
        yield* TestClock.adjust("1 day")
        const store = yield* openStore(options)
        const { keys } = yield* openServer(store)
        expect((yield* keys.current).kid).toBe(before)
        expect((yield* storedKeys.pipe(Effect.provide(store))).map((r) => r.kid)).toEqual([before])
      }))

    it.scoped("two servers starting at once on an empty database make one key between them and both sign with it", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const options = yield* freshDatabase(backend.kind)
        // Postgres: two connections pools, as two processes would have; SQLite is one process per file.
        const store = yield* openStore(options)
        const other = backend.kind === "postgres" ? yield* openStore(options) : store
        const [one, two] = yield* Effect.all([openServer(store), openServer(other)], { concurrency: 2 })
        const kid = (yield* one.keys.current).kid
        expect((yield* two.keys.current).kid).toBe(kid)
        expect((yield* storedKeys.pipe(Effect.provide(store))).map((r) => [r.kid, r.retired_at])).toEqual([[kid, null]])
      }))

    it.scoped("rotation signs with a new key, keeps the retired one for verification, and deletes it once no token it signed can be valid", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        const { keys } = yield* openServer(store)
        const first = (yield* keys.current).kid
        const second = (yield* keys.rotate).kid
        expect(second).not.toBe(first)
        expect((yield* keys.current).kid).toBe(second)
        expect((yield* keys.jwks).keys.map((k) => k.kid)).toEqual([second, first])
        expect(yield* keys.keyFor(first)).toBeDefined()
        // Kept for the longest token lifetime (1 h) and the reload interval (1 min).
        yield* TestClock.adjust("61 minutes")
        expect(yield* keys.keyFor(first)).toBeDefined()
        yield* TestClock.adjust("1 second")
        const third = (yield* keys.rotate).kid
        expect((yield* keys.jwks).keys.map((k) => k.kid)).toEqual([third, second])
        expect(yield* keys.keyFor(first)).toBeUndefined()
        expect((yield* storedKeys.pipe(Effect.provide(store))).map((r) => r.kid)).toEqual([third, second])
      }))

    it.scoped("renewal replaces a key older than the age given, once between two servers, and leaves a younger one", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        const a = (yield* openServer(store)).keys
        const b = (yield* openServer(store)).keys
        const first = (yield* a.current).kid
        // An age in minutes stands for the server's 30 days: moving the TestClock days ahead runs every
        // periodic reload of the servers for each minute skipped.
        expect(yield* a.renew("10 minutes")).toBe(false)
        yield* TestClock.adjust("11 minutes")
        expect(yield* a.renew("10 minutes")).toBe(true)
        // The other server looks a moment later: the key is young now, so it keeps it.
        expect(yield* b.renew("10 minutes")).toBe(false)
        const renewed = (yield* a.current).kid
        expect(renewed).not.toBe(first)
        expect((yield* b.keyFor(renewed))).toBeDefined()
        const rows = yield* storedKeys.pipe(Effect.provide(store))
        expect(rows.filter((row) => row.retired_at === null).map((row) => row.kid)).toEqual([renewed])
      }))

    it.scoped("a start deletes the keys retired long enough ago", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const options = yield* freshDatabase(backend.kind)
        const store = yield* openStore(options)
        const { keys } = yield* openServer(store)
        const first = (yield* keys.current).kid
        const second = (yield* keys.rotate).kid
        yield* TestClock.adjust("2 hours")
        yield* openServer(store)
        expect((yield* storedKeys.pipe(Effect.provide(store))).map((r) => r.kid)).toEqual([second])
        expect(first).not.toBe(second)
      }))

    it.scoped("another server finds a rotated key by its kid at once, reads the table for unknown kids at most every 5 seconds, and signs with the new key within a minute", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        const a = yield* openServer(store)
        const b = yield* openServer(store)
        const before = (yield* b.keys.current).kid
        const second = (yield* a.keys.rotate).kid
        expect(yield* b.keys.keyFor(second)).toBeDefined()
        // Bogus kids right after cost nothing: the table is not read again for 5 seconds.
        expect(yield* b.keys.keyFor("no-such-kid")).toBeUndefined()
        const third = (yield* a.keys.rotate).kid
        expect(yield* b.keys.keyFor(third)).toBeUndefined()
        yield* TestClock.adjust("5 seconds")
        expect(yield* b.keys.keyFor(third)).toBeDefined()
        // b read the table for the unknown kid: it now signs with the newest key too.
        expect((yield* b.keys.current).kid).toBe(third)
        expect(before).not.toBe(third)
      }))

    it.scoped("a server signs with another server's new key once its keys are a minute old", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        const a = yield* openServer(store)
        const b = yield* openServer(store)
        const before = (yield* b.keys.current).kid
        const rotated = (yield* a.keys.rotate).kid
        yield* TestClock.adjust("59 seconds")
        expect((yield* b.keys.current).kid).toBe(before)
        expect((yield* b.keys.jwks).keys.map((k) => k.kid)).toEqual([before])
        yield* TestClock.adjust("1 second")
        expect((yield* b.keys.current).kid).toBe(rotated)
        expect((yield* b.keys.jwks).keys.map((k) => k.kid)).toEqual([rotated, before])
      }))
  })
}
