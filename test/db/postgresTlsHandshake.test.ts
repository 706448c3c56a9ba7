/** TLS against a stand-in server that accepts Postgres' SSLRequest, shows its certificate and hangs up. */
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
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const address = server.address()
    port = typeof address === "object" && address !== null ? address.port : 0
    return () => {
      server.close()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  const reason = (host: string, query: string) =>
    Effect.scoped(make({ kind: "postgres", sqlitePath: "", postgresUrl: `postgres://svc@${host}:${port}/svc?${query}`, pool: 1 })).pipe(
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
})
