import * as Reactivity from "@effect/experimental/Reactivity"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as Tls from "node:tls"
import { make } from "../../src/db/Database.ts"
import { clientTls, maskUrl, parsePostgresUrl, type PostgresTarget, sslOptions, tlsLoader } from "../../src/db/postgresTls.ts"
import { adminUrl } from "../support/postgres.ts"
import { pgAvailable, tempDirectory } from "../support/backends.ts"

const base = "postgres://svc:pw@db.example:5432/svc"

const target = (query: string): PostgresTarget => {
  const parsed = parsePostgresUrl(`${base}?${query}`)
  if (Either.isLeft(parsed)) throw new Error(parsed.left)
  return parsed.right
}

const refusal = (query: string): string | undefined =>
  Either.match(parsePostgresUrl(`${base}?${query}`), { onLeft: (reason) => reason, onRight: () => undefined })

const files = { ca: "CA PEM", cert: "CERT PEM", key: "KEY PEM" }

const hostCheck = (options: false | Tls.ConnectionOptions) =>
  options === false ? "none" : options.checkServerIdentity === undefined ? "default" : "custom"

describe("Postgres TLS parameters", () => {
  it("default and sslmode=disable use no TLS", () => {
    expect(sslOptions(target(""), {})).toBe(false)
    expect(sslOptions(target("sslmode=disable"), {})).toBe(false)
  })

  it("prefer encrypts without checking the certificate", () => {
    expect(sslOptions(target("sslmode=prefer"), {})).toEqual({ rejectUnauthorized: false })
  })

  it("require checks nothing, unless sslrootcert is given: then the chain but not the host", () => {
    expect(sslOptions(target("sslmode=require"), {})).toEqual({ rejectUnauthorized: false })
    const withCa = sslOptions(target("sslmode=require&sslrootcert=/ca.pem"), { ca: files.ca })
    expect(withCa).toMatchObject({ rejectUnauthorized: true, ca: "CA PEM" })
    expect(hostCheck(withCa)).toBe("custom")
    expect(withCa !== false && withCa.checkServerIdentity?.("db.example", { subject: {} } as Tls.PeerCertificate)).toBeUndefined()
  })

  it("verify-ca checks the chain against sslrootcert only, not the host name", () => {
    const options = sslOptions(target("sslmode=verify-ca&sslrootcert=/ca.pem"), { ca: files.ca })
    expect(options).toMatchObject({ rejectUnauthorized: true, ca: "CA PEM" })
    expect(options !== false && options.checkServerIdentity?.("other.host", { subject: {} } as Tls.PeerCertificate)).toBeUndefined()
  })

  it("verify-full checks the chain and the host, by subjectAltName only", () => {
    const options = sslOptions(target("sslmode=verify-full&sslrootcert=/ca.pem"), { ca: files.ca })
    expect(options).toMatchObject({ rejectUnauthorized: true, ca: "CA PEM" })
    const check = options === false ? undefined : options.checkServerIdentity
    const cnOnly = { subject: { CN: "db.example" } } as Tls.PeerCertificate
    const withSan = { subject: { CN: "x" }, subjectaltname: "DNS:db.example" } as Tls.PeerCertificate
    const otherSan = { subject: { CN: "db.example" }, subjectaltname: "DNS:other.example" } as Tls.PeerCertificate
    expect(check?.("db.example", cnOnly)?.message).toContain("no subjectAltName")
    expect(check?.("db.example", withSan)).toBeUndefined()
    expect(check?.("db.example", otherSan)).toBeInstanceOf(Error)
  })

  it("client certificates are passed on with any TLS mode", () => {
    const options = sslOptions(target("sslmode=require&sslcert=/c.pem&sslkey=/k.pem"), { cert: files.cert, key: files.key })
    expect(options).toMatchObject({ cert: "CERT PEM", key: "KEY PEM", rejectUnauthorized: false })
  })

  it("a Unix socket never uses TLS", () => {
    const socket = parsePostgresUrl("postgres:///svc?host=%2Fvar%2Frun%2Fpostgresql&sslmode=require")
    expect(Either.map(socket, (t) => [t.unixSocket, sslOptions(t, {})])).toEqual(Either.right([true, false]))
  })

  it("the ssl parameters are taken out of the URL node-postgres sees; others stay", () => {
    const t = target("sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20file.pem&sslnegotiation=direct&application_name=x")
    expect(t.rootcert).toBe("/etc/ca file.pem")
    expect(t.negotiation).toBe("direct")
    expect(t.connectionString).toBe(`${base}?application_name=x`)
  })

  it("each connection is told how TLS starts: directly only when it uses TLS", () => {
    const direct = target("sslmode=require&sslnegotiation=direct")
    expect(clientTls(direct, { rejectUnauthorized: false })).toEqual({ ssl: { rejectUnauthorized: false }, sslnegotiation: "direct" })
    expect(clientTls(direct, false)).toEqual({ ssl: false, sslnegotiation: "postgres" })
    expect(clientTls(target("sslmode=require"), { rejectUnauthorized: false }).sslnegotiation).toBe("postgres")
  })

  it("refuses what the spec forbids, in plain words", () => {
    expect(refusal("sslmode=bogus")).toBe(`unknown sslmode "bogus"; use disable, prefer, require, verify-ca or verify-full`)
    expect(refusal("sslmode=allow")).toContain("sslmode=allow is not supported")
    expect(refusal("sslmode=verify-full")).toBe("sslmode=verify-full needs sslrootcert (there is no system trust store fallback)")
    expect(refusal("sslmode=verify-ca")).toContain("sslmode=verify-ca needs sslrootcert")
    expect(refusal("sslrootcert=/ca.pem")).toBe("sslrootcert, sslcert and sslkey cannot be used with sslmode=disable")
    expect(refusal("sslmode=disable&sslcert=/c.pem&sslkey=/k.pem")).toContain("cannot be used with sslmode=disable")
    expect(refusal("sslmode=require&sslcert=/c.pem")).toBe("give both sslcert and sslkey, or neither")
    expect(refusal("sslmode=require&sslkey=/k.pem")).toBe("give both sslcert and sslkey, or neither")
    expect(refusal("ssl=true")).toContain("use sslmode")
    expect(refusal("sslmode=require&sslnegotiation=tls")).toBe(`unknown sslnegotiation "tls"; use postgres or direct`)
    expect(refusal("sslnegotiation=direct")).toBe("sslnegotiation=direct needs sslmode=require, verify-ca or verify-full (got disable)")
    expect(refusal("sslmode=prefer&sslnegotiation=direct")).toContain("(got prefer)")
  })

  it("masks the password", () => {
    expect(maskUrl("postgres://svc:s3cret@h:5432/db?sslmode=require")).toBe("postgres://svc:***@h:5432/db?sslmode=require")
    expect(maskUrl("postgres://svc@h/db")).toBe("postgres://svc@h/db")
  })

  it.scoped("certificate files are read again when they change", () =>
    Effect.gen(function*() {
      const dir = yield* tempDirectory
      const ca = Path.join(dir, "ca.pem")
      Fs.writeFileSync(ca, "first")
      const load = tlsLoader(target(`sslmode=verify-ca&sslrootcert=${encodeURIComponent(ca)}`))
      expect(load()).toMatchObject({ ca: "first" })
      Fs.writeFileSync(ca, "second")
      Fs.utimesSync(ca, new Date(2030, 0, 1), new Date(2030, 0, 1))
      expect(load()).toMatchObject({ ca: "second" })
    }))

  describe("at start-up", () => {
    const open = (url: string) =>
      Effect.scoped(make({ kind: "postgres", sqlitePath: "", postgresUrl: url, pool: 1 })).pipe(
        Effect.provide(Reactivity.layer),
        Effect.flip
      )

    it.live("a forbidden combination stops the start with the database named", () =>
      Effect.gen(function*() {
        const error = yield* open("postgres://svc:pw@127.0.0.1:1/svc?sslmode=verify-full")
        expect(error.message).toBe(
          "cannot open database postgres://svc:***@127.0.0.1:1/svc?sslmode=verify-full: sslmode=verify-full needs sslrootcert (there is no system trust store fallback)"
        )
      }))

    it.live("a certificate file that does not exist is named", () =>
      Effect.gen(function*() {
        const error = yield* open("postgres://svc@127.0.0.1:1/svc?sslmode=verify-ca&sslrootcert=%2Fno%2Fsuch%2Fca.pem")
        expect(error.message).toContain("sslrootcert file /no/such/ca.pem does not exist or cannot be read")
      }))

    it.live.skipIf(!pgAvailable)("prefer falls back to no TLS, require refuses, when the server offers none", () =>
      Effect.gen(function*() {
        const offersTls = yield* Effect.scoped(Effect.gen(function*() {
          const db = yield* make({ kind: "postgres", sqlitePath: "", postgresUrl: `${adminUrl}?sslmode=prefer`, pool: 1 })
          yield* db.probe
          return (yield* db.stats).tls
        })).pipe(Effect.provide(Reactivity.layer))
        if (offersTls) return // This server offers TLS: nothing to fall back from.
        const error = yield* open(`${adminUrl}?sslmode=require`)
        expect(error.message).toContain("the server does not offer TLS, but sslmode=require requires it")
      }))
  })
})
