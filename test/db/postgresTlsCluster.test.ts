/**
 * Postgres TLS (interface spec, Versioning item 6) against a real Postgres with TLS, through the
 * Database layer: each sslmode row, client certificates, the start-up refusals and certificate files
 * read again when they change. Encryption is read from the server (`pg_stat_ssl`) and shown by a
 * database that pg_hba.conf refuses without TLS.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Database, make } from "../../src/db/Database.ts"
import { startTlsCluster, type TlsCluster, tlsClusterAvailable, type UrlOptions } from "../support/tlsCluster.ts"

describe.skipIf(!tlsClusterAvailable)("Postgres TLS against a real server", () => {
  let cluster: TlsCluster
  beforeAll(async () => {
    cluster = await startTlsCluster()
  })
  afterAll(() => cluster?.stop())

  const url = (options: UrlOptions) => cluster.url(options)
  const ca = (name: "ca" | "other-ca") => cluster.file(`${name}.pem`)

  const withDatabase = <A, E>(postgresUrl: string, f: (db: Database["Type"]) => Effect.Effect<A, E>, pool = 1) =>
    Effect.scoped(Effect.flatMap(make({ kind: "postgres", sqlitePath: "", postgresUrl, pool }), f)).pipe(Effect.provide(Reactivity.layer))

  /** What the server says of the connection: TLS or not, and who connected; and what the layer reports. */
  const connection = (options: UrlOptions) =>
    withDatabase(url(options), (db) =>
      Effect.gen(function*() {
        const [row] = yield* db.writer<{ ssl: boolean; user: string }>`SELECT ssl, current_user AS user FROM pg_stat_ssl WHERE pid = pg_backend_pid()`
        return { encrypted: row?.ssl, user: row?.user, reported: (yield* db.stats).tls }
      }))

  const encrypted = { encrypted: true, reported: true }
  const plain = { encrypted: false, reported: false }

  /** Why the layer did not open. */
  const refusal = (options: UrlOptions) =>
    Effect.map(Effect.flip(withDatabase(url(options), () => Effect.void)), (error) => error.message)

  const certificateRefused = /: TLS: .*certificate/

  describe("with TLS on and a certificate for 127.0.0.1 from the test CA", () => {
    beforeAll(() => cluster.serve({ ssl: true, certificate: "server" }))

    it.live("no sslmode and sslmode=disable connect without TLS; a database reachable only over TLS refuses them", () =>
      Effect.gen(function*() {
        expect(yield* connection({})).toMatchObject(plain)
        expect(yield* connection({ params: { sslmode: "disable" } })).toMatchObject(plain)
        for (const params of [{}, { sslmode: "disable" }]) {
          expect(yield* refusal({ database: "tlsonly", params })).toMatch(/: authentication failed: pg_hba\.conf rejects connection .*database "tlsonly", no encryption$/)
        }
      }))

    it.live("prefer encrypts when the server offers TLS, without checking its certificate", () =>
      Effect.gen(function*() {
        expect(yield* connection({ params: { sslmode: "prefer" } })).toMatchObject(encrypted)
        expect(yield* connection({ database: "tlsonly", params: { sslmode: "prefer" } })).toMatchObject(encrypted)
      }))

    it.live("require encrypts without checking the certificate; with sslrootcert it checks the chain", () =>
      Effect.gen(function*() {
        expect(yield* connection({ database: "tlsonly", params: { sslmode: "require" } })).toMatchObject(encrypted)
        expect(yield* connection({ database: "tlsonly", params: { sslmode: "require", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* refusal({ params: { sslmode: "require", sslrootcert: ca("other-ca") } })).toMatch(certificateRefused)
      }))

    it.live("verify-ca accepts a chain that leads to sslrootcert and refuses another CA's", () =>
      Effect.gen(function*() {
        expect(yield* connection({ params: { sslmode: "verify-ca", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* refusal({ params: { sslmode: "verify-ca", sslrootcert: ca("other-ca") } })).toMatch(certificateRefused)
      }))

    it.live("verify-full accepts the right CA's certificate for the URL's host, address or name, and refuses another CA's", () =>
      Effect.gen(function*() {
        expect(yield* connection({ params: { sslmode: "verify-full", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* connection({ host: "localhost", params: { sslmode: "verify-full", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* refusal({ params: { sslmode: "verify-full", sslrootcert: ca("other-ca") } })).toMatch(certificateRefused)
      }))

    it.live("a user the server admits by client certificate connects with sslcert and sslkey, and is refused without", () =>
      Effect.gen(function*() {
        const verified = { sslmode: "verify-full", sslrootcert: ca("ca") }
        const client = { sslcert: cluster.file("client.pem"), sslkey: cluster.file("client.key") }
        expect(yield* connection({ user: "certuser", params: { ...verified, ...client } })).toMatchObject({ ...encrypted, user: "certuser" })
        expect(yield* connection({ user: "certuser", params: { sslmode: "require", ...client } })).toMatchObject({ ...encrypted, user: "certuser" })
        expect(yield* refusal({ user: "certuser", params: verified })).toMatch(
          /: authentication failed: connection requires a valid client certificate$/
        )
        expect(yield* refusal({ user: "certuser", params: { sslmode: "disable" } })).toMatch(/: authentication failed: pg_hba\.conf rejects connection/)
      }))

    it.live("over the Unix socket TLS is not used, whatever the sslmode", () =>
      Effect.gen(function*() {
        const socket = `postgres:///svc?host=${encodeURIComponent(cluster.dir)}&port=${cluster.port}&user=postgres`
        for (const query of ["sslmode=require", "sslmode=verify-full", "sslmode=verify-full&sslnegotiation=direct"]) {
          const result = yield* withDatabase(`${socket}&${query}&sslrootcert=${encodeURIComponent(ca("ca"))}`, (db) =>
            Effect.map(db.writer<{ ssl: boolean }>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`, (rows) => rows[0]?.ssl))
          expect(result).toBe(false)
        }
      }))

    it.scopedLive("the PGSSLMODE and PGSSLNEGOTIATION environment variables are not read", () =>
      Effect.gen(function*() {
        const names = ["PGSSLMODE", "PGSSLNEGOTIATION"] as const
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const saved = names.map((name) => process.env[name])
            process.env["PGSSLMODE"] = "require"
            // This server (before Postgres 17) cannot take a direct TLS start.
            process.env["PGSSLNEGOTIATION"] = "direct"
            return saved
          }),
          (saved) =>
            Effect.sync(() =>
              names.forEach((name, i) => {
                const value = saved[i]
                if (value === undefined) delete process.env[name]
                else process.env[name] = value
              })
            )
        )
        expect(yield* connection({})).toMatchObject(plain)
        expect(yield* connection({ params: { sslmode: "require" } })).toMatchObject(encrypted)
      }))

    it.live("what the spec forbids stops the start, with the reason, before any connection", () =>
      Effect.gen(function*() {
        const start = `cannot open database ${url({ params: {} })}?`
        const cases: Array<[Record<string, string>, string]> = [
          [{ sslmode: "bogus" }, `unknown sslmode "bogus"; use disable, prefer, require, verify-ca or verify-full`],
          [{ sslmode: "verify-full" }, "sslmode=verify-full needs sslrootcert (there is no system trust store fallback)"],
          [{ sslmode: "disable", sslrootcert: ca("ca") }, "sslrootcert, sslcert and sslkey cannot be used with sslmode=disable"],
          [{ sslcert: cluster.file("client.pem"), sslkey: cluster.file("client.key") }, "sslrootcert, sslcert and sslkey cannot be used with sslmode=disable"]
        ]
        for (const [params, reason] of cases) {
          const message = yield* refusal({ params })
          expect(message.startsWith(start)).toBe(true)
          expect(message.endsWith(`: ${reason}`)).toBe(true)
        }
      }))

    it.live("a replaced sslrootcert applies to the next new connection, without a restart, both ways", () =>
      Effect.gen(function*() {
        // A path with characters that must be percent-encoded in the URL.
        const folder = Path.join(cluster.dir, "ca dir & #1")
        Fs.mkdirSync(folder, { recursive: true })
        const rootcert = Path.join(folder, "root ca?.pem")
        let mtime = Date.now() / 1000
        const install = (name: "ca" | "other-ca") => {
          Fs.copyFileSync(ca(name), rootcert)
          // A whole second on from the last time, however coarse the file system's clock.
          mtime += 1
          Fs.utimesSync(rootcert, mtime, mtime)
        }
        install("ca")
        const postgresUrl = url({ params: { sslmode: "verify-full", sslrootcert: rootcert } })
        expect(postgresUrl).toContain("sslrootcert=" + encodeURIComponent(rootcert))
        const results = yield* withDatabase(postgresUrl, (db) =>
          Effect.gen(function*() {
            const sql = db.writer
            const tls = Effect.map(sql<{ ssl: boolean }>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`, (rows) => rows[0]?.ssl)
            // The pool's first connection stays busy, so each query below needs a new one.
            const inside = yield* Deferred.make<void>()
            const release = yield* Deferred.make<void>()
            const holding = yield* sql.withTransaction(Effect.zipRight(Deferred.succeed(inside, undefined), Deferred.await(release))).pipe(Effect.fork)
            yield* Deferred.await(inside)
            install("other-ca")
            const withOtherCa = yield* Effect.either(tls)
            install("ca")
            const withCaAgain = yield* tls
            yield* Deferred.succeed(release, undefined)
            yield* Fiber.join(holding)
            return { withOtherCa, withCaAgain }
          }), 2)
        expect(results.withOtherCa._tag).toBe("Left")
        expect(String(results.withOtherCa._tag === "Left" ? results.withOtherCa.left.cause : "")).toMatch(/certificate/)
        expect(results.withCaAgain).toBe(true)
      }))
  })

  describe("with a certificate from the test CA that does not name 127.0.0.1 in subjectAltName", () => {
    beforeAll(() => cluster.serve({ ssl: true, certificate: "elsewhere" }))

    it.live("verify-ca and require with sslrootcert accept it; verify-full refuses it", () =>
      Effect.gen(function*() {
        expect(yield* connection({ params: { sslmode: "verify-ca", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* connection({ params: { sslmode: "require", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        expect(yield* refusal({ params: { sslmode: "verify-full", sslrootcert: ca("ca") } })).toMatch(
          /: TLS: Hostname\/IP does not match certificate's altnames: IP: 127\.0\.0\.1 is not in the cert's list/
        )
      }))
  })

  describe("with a certificate from the test CA that names localhost only as its common name", () => {
    beforeAll(() => cluster.serve({ ssl: true, certificate: "cn-only" }))

    it.live("verify-ca accepts it; verify-full refuses it, by name and by address", () =>
      Effect.gen(function*() {
        expect(yield* connection({ host: "localhost", params: { sslmode: "verify-ca", sslrootcert: ca("ca") } })).toMatchObject(encrypted)
        for (const host of ["localhost", "127.0.0.1"] as const) {
          expect(yield* refusal({ host, params: { sslmode: "verify-full", sslrootcert: ca("ca") } })).toMatch(
            new RegExp(`: the server certificate has no subjectAltName for ${host.replaceAll(".", "\\.")}$`)
          )
        }
      }))
  })

  describe("with TLS off", () => {
    beforeAll(() => cluster.serve({ ssl: false, certificate: "server" }))

    it.live("prefer connects without TLS; require, verify-ca and verify-full refuse to", () =>
      Effect.gen(function*() {
        expect(yield* connection({ params: { sslmode: "prefer" } })).toMatchObject(plain)
        for (const sslmode of ["require", "verify-ca", "verify-full"]) {
          expect(yield* refusal({ params: { sslmode, sslrootcert: ca("ca") } })).toMatch(
            new RegExp(`: the server does not offer TLS, but sslmode=${sslmode} requires it$`)
          )
        }
      }))
  })
})
