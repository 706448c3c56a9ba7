/**
 * TLS against stand-in servers that show their certificate and hang up: one after accepting Postgres'
 * SSLRequest, one that speaks TLS at once, as Postgres 17 does for `sslnegotiation=direct`.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Tls from "node:tls"
import { make } from "../../src/db/Database.ts"

const hasOpenssl = ChildProcess.spawnSync("openssl", ["version"]).status === 0

const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "svc-tls-"))
const file = (name: string) => Path.join(dir, name)
const openssl = (...args: Array<string>) => ChildProcess.execFileSync("openssl", args, { stdio: "ignore" })

const makeCa = (name: string) =>
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", file(`${name}.key`), "-out", file(`${name}.pem`), "-days", "1", "-subj", `/CN=${name}`)

let port = 0
let directPort = 0
/** The ALPN protocol of each TLS session the direct stand-in completed. */
const directSessions: Array<string | false | null> = []

describe.skipIf(!hasOpenssl)("Postgres TLS handshake", () => {
  beforeAll(async () => {
    makeCa("ca")
    makeCa("other-ca")
    Fs.writeFileSync(file("san.ext"), "subjectAltName=IP:127.0.0.1\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", file("server.key"), "-out", file("server.csr"), "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"), "-CAcreateserial", "-out", file("server.pem"), "-days", "1", "-extfile", file("san.ext"))
    const key = Fs.readFileSync(file("server.key"))
    const cert = Fs.readFileSync(file("server.pem"))
    const server = Net.createServer((socket) => {
      socket.on("error", () => {})
      socket.once("data", () => {
        socket.write("S")
        const secure = new Tls.TLSSocket(socket, { isServer: true, key, cert })
        secure.on("error", () => {})
        secure.on("secure", () => secure.end())
      })
    })
    const direct = Tls.createServer({ key, cert, ALPNProtocols: ["postgresql"] }, (secure) => {
      directSessions.push(secure.alpnProtocol)
      secure.end()
    })
    direct.on("tlsClientError", () => {})
    const listen = async (on: Net.Server) => {
      await new Promise<void>((resolve) => on.listen(0, "127.0.0.1", resolve))
      const address = on.address()
      return typeof address === "object" && address !== null ? address.port : 0
    }
    port = await listen(server)
    directPort = await listen(direct)
    return () => {
      server.close()
      direct.close()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  const reason = (host: string, query: string, on = port) =>
    Effect.scoped(make({ kind: "postgres", sqlitePath: "", postgresUrl: `postgres://svc@${host}:${on}/svc?${query}`, pool: 1 })).pipe(
      Effect.provide(Reactivity.layer),
      Effect.flip,
      Effect.map((error) => error.reason)
    )
  const ca = (name: string) => `sslrootcert=${encodeURIComponent(file(`${name}.pem`))}`
  const handshakeDone = "closed the connection before answering"

  it.live("verify-full accepts a certificate from sslrootcert naming the host", () =>
    Effect.map(reason("127.0.0.1", `sslmode=verify-full&${ca("ca")}`), (r) => expect(r).toContain(handshakeDone)))

  it.live("verify-full refuses a certificate from another CA", () =>
    Effect.map(reason("127.0.0.1", `sslmode=verify-full&${ca("other-ca")}`), (r) => expect(r).toMatch(/^TLS: /)))

  it.live("verify-full refuses a certificate for another host; verify-ca does not check the host", () =>
    Effect.gen(function*() {
      expect(yield* reason("localhost", `sslmode=verify-full&${ca("ca")}`)).toMatch(/^TLS: .*localhost/)
      expect(yield* reason("localhost", `sslmode=verify-ca&${ca("ca")}`)).toContain(handshakeDone)
    }))

  it.live("require checks nothing without sslrootcert, and the chain with it", () =>
    Effect.gen(function*() {
      expect(yield* reason("localhost", "sslmode=require")).toContain(handshakeDone)
      expect(yield* reason("localhost", `sslmode=require&${ca("other-ca")}`)).toMatch(/^TLS: /)
    }))

  it.live("sslnegotiation=direct starts TLS at once and keeps the sslmode's checks", () =>
    Effect.gen(function*() {
      const direct = (host: string, query: string) => reason(host, `sslnegotiation=direct&${query}`, directPort)
      // A session the stand-in completed, with the protocol Postgres 17 demands.
      const session = (host: string, query: string) =>
        Effect.gen(function*() {
          const before = directSessions.length
          const result = yield* direct(host, query)
          return { result, sessions: directSessions.slice(before) }
        })
      const completed = { result: expect.stringContaining(handshakeDone), sessions: ["postgresql"] }
      expect(yield* session("127.0.0.1", `sslmode=verify-full&${ca("ca")}`)).toEqual(completed)
      expect(yield* session("localhost", `sslmode=verify-ca&${ca("ca")}`)).toEqual(completed)
      expect(yield* session("localhost", "sslmode=require")).toEqual(completed)
      expect(yield* direct("127.0.0.1", `sslmode=verify-full&${ca("other-ca")}`)).toMatch(/^TLS: /)
      expect(yield* direct("localhost", `sslmode=verify-full&${ca("ca")}`)).toMatch(/^TLS: .*localhost/)
    }))
})
