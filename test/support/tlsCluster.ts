/**
 * A throwaway Postgres cluster with TLS for one test file: a test CA and certificates made with
 * `openssl`, a cluster made with `initdb` in a temporary directory, listening on 127.0.0.1 on a free
 * port with its Unix socket in that directory. `stop` shuts it down and deletes everything.
 *
 * pg_hba.conf, first match wins:
 * - Unix socket: trust.
 * - user `certuser`: only over TLS, with a client certificate signed by the test CA (`cert`).
 * - database `tlsonly`: refused without TLS (`hostnossl ... reject`), so "encrypted" is observable.
 * - everything else: trust, with or without TLS.
 *
 * Without `openssl` or `initdb` the tests are skipped with a visible notice, except under CI=true,
 * where that is a failure. Postgres refuses to run as root: a root test run starts it as the
 * `postgres` OS user.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"

const runs = (command: string, args: ReadonlyArray<string>): boolean => ChildProcess.spawnSync(command, args, { stdio: "ignore" }).status === 0

const versionOrder = (a: string, b: string): number => Number.parseFloat(b) - Number.parseFloat(a)

/** The directory of `initdb` and `pg_ctl`: on the PATH, or the newest Debian-style versioned directory. */
const findBinDir = (): string | undefined => {
  const onPath = ChildProcess.spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" })
  if (onPath.status === 0 && onPath.stdout.trim() !== "") return Path.dirname(onPath.stdout.trim())
  const root = "/usr/lib/postgresql"
  const versions = Fs.existsSync(root) ? Fs.readdirSync(root).filter((v) => /^\d+(\.\d+)?$/.test(v)).sort(versionOrder) : []
  return versions.map((v) => Path.join(root, v, "bin")).find((bin) => Fs.existsSync(Path.join(bin, "initdb")))
}

const isRoot = process.getuid?.() === 0

interface Tools {
  readonly bin: string
  /** The OS user Postgres runs as when the tests run as root. */
  readonly owner?: { readonly uid: number; readonly gid: number } | undefined
}

const findTools = (): Tools | string => {
  if (!runs("openssl", ["version"])) return "`openssl` is not on the PATH"
  const bin = findBinDir()
  if (bin === undefined) return "no `initdb` on the PATH or under /usr/lib/postgresql/<version>/bin"
  if (!isRoot) return { bin }
  const id = (flag: string) => ChildProcess.spawnSync("id", [flag, "postgres"], { encoding: "utf8" })
  const [uid, gid] = [id("-u"), id("-g")]
  if (uid.status !== 0 || gid.status !== 0) return "the tests run as root and there is no `postgres` OS user to run Postgres as"
  if (!runs("runuser", ["--help"])) return "the tests run as root and `runuser` is missing"
  return { bin, owner: { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) } }
}

const found = findTools()

/** Whether a TLS cluster can be started here; a notice (or, under CI=true, an error) when not. */
export const tlsClusterAvailable: boolean = (() => {
  if (typeof found !== "string") return true
  if (process.env["CI"] === "true") throw new Error(`the Postgres TLS cluster tests are required under CI but cannot run: ${found}`)
  console.warn(`NOTICE: Postgres TLS cluster tests skipped: ${found}`)
  return false
})()

/** The certificate the server presents. */
export type ServerCertificate =
  /** subjectAltName IP:127.0.0.1 and DNS:localhost, signed by the test CA. */
  | "server"
  /** common name 127.0.0.1 but subjectAltName DNS:elsewhere.example only, signed by the test CA. */
  | "elsewhere"
  /** common name localhost and no subjectAltName at all, signed by the test CA. */
  | "cn-only"

export interface ServerSettings {
  readonly ssl: boolean
  readonly certificate: ServerCertificate
}

export interface UrlOptions {
  /** `localhost` names the same loopback address by name. */
  readonly host?: "127.0.0.1" | "localhost"
  readonly user?: string
  readonly database?: string
  /** Connection parameters, percent-encoded into the query string in this order. */
  readonly params?: Record<string, string>
}

export interface TlsCluster {
  readonly port: number
  /** The temporary directory: certificates, the data directory and the Unix socket. */
  readonly dir: string
  /**
   * A file made at start: `ca.pem` (the test CA), `other-ca.pem` (a second CA that signed nothing the
   * server shows), `client.pem`/`client.key` (CN=certuser, signed by the test CA).
   */
  readonly file: (name: string) => string
  /** A URL to the cluster over TCP: host 127.0.0.1, user `postgres` and database `svc` unless told. */
  readonly url: (options?: UrlOptions) => string
  /** Restarts the server with these settings when they differ from the current ones. */
  readonly serve: (settings: ServerSettings) => void
  /** Shuts the server down and deletes the directory; safe to call more than once. */
  readonly stop: () => void
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const run = (command: string, args: ReadonlyArray<string>, cwd: string): void => {
  const result = ChildProcess.spawnSync(command, args, { cwd, encoding: "utf8", timeout: 60_000 })
  if (result.status !== 0) {
    throw new Error(`${Path.basename(command)} ${args.join(" ")} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}`)
  }
}

const chownTree = (path: string, owner: { readonly uid: number; readonly gid: number }): void => {
  Fs.chownSync(path, owner.uid, owner.gid)
  if (Fs.statSync(path).isDirectory()) for (const entry of Fs.readdirSync(path)) chownTree(Path.join(path, entry), owner)
}

/** Makes the CAs and certificates in `dir`, with EC keys (fast to generate). */
const makeCertificates = (dir: string): void => {
  const openssl = (...args: Array<string>) => run("openssl", args, dir)
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  for (const ca of ["ca", "other-ca"]) {
    openssl("req", "-x509", ...key, "-keyout", `${ca}.key`, "-out", `${ca}.pem`, "-days", "2", "-subj", `/CN=svc test ${ca}`)
  }
  const signed = (name: string, subject: string, extensions: string) => {
    Fs.writeFileSync(Path.join(dir, `${name}.ext`), extensions)
    openssl("req", ...key, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject)
    openssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.pem`, "-days", "2", "-extfile", `${name}.ext`)
  }
  signed("server", "/CN=svc test server", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  signed("elsewhere", "/CN=127.0.0.1", "subjectAltName=DNS:elsewhere.example\n")
  signed("cn-only", "/CN=localhost", "basicConstraints=CA:FALSE\n")
  signed("client", "/CN=certuser", "extendedKeyUsage=clientAuth\n")
  // Postgres refuses a private key that others can read.
  for (const name of ["server", "elsewhere", "cn-only", "client"]) Fs.chmodSync(Path.join(dir, `${name}.key`), 0o600)
}

const hba = `
local     all      all                     trust
hostssl   all      certuser  127.0.0.1/32  cert
host      all      certuser  127.0.0.1/32  reject
hostnossl tlsonly  all       127.0.0.1/32  reject
hostssl   all      all       127.0.0.1/32  trust
host      all      all       127.0.0.1/32  trust
`

const settingsFile = (dir: string, settings: ServerSettings): string =>
  [
    `ssl = ${settings.ssl ? "on" : "off"}`,
    `ssl_cert_file = '${Path.join(dir, `${settings.certificate}.pem`)}'`,
    `ssl_key_file = '${Path.join(dir, `${settings.certificate}.key`)}'`,
    `ssl_ca_file = '${Path.join(dir, "ca.pem")}'`,
    ""
  ].join("\n")

/** Makes the certificates and the cluster and starts it, with TLS on and the `server` certificate. */
export const startTlsCluster = async (): Promise<TlsCluster> => {
  if (typeof found === "string") throw new Error(`cannot start a Postgres TLS cluster: ${found}`)
  const { bin, owner } = found
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "svc-pg-tls-"))
  const data = Path.join(dir, "data")
  const log = Path.join(dir, "server.log")
  // As the OS user that owns the cluster: `postgres` when the tests run as root.
  const asOwner = (tool: string, ...args: Array<string>) =>
    owner === undefined ? run(Path.join(bin, tool), args, dir) : run("runuser", ["-u", "postgres", "--", Path.join(bin, tool), ...args], dir)
  let running = false
  const stopServer = (mode: "fast" | "immediate") => {
    if (running) asOwner("pg_ctl", "-D", data, "-m", mode, "-w", "stop")
    running = false
  }
  const startServer = () => {
    running = true
    try {
      asOwner("pg_ctl", "-D", data, "-l", log, "-w", "-t", "30", "start")
    } catch (error) {
      const tail = Fs.existsSync(log) ? Fs.readFileSync(log, "utf8").split("\n").slice(-20).join("\n") : ""
      throw new Error(`${String(error)}\n${tail}`)
    }
  }
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    process.off("exit", stop)
    try {
      stopServer("immediate")
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  // A worker that ends without running afterAll still takes its server with it.
  process.on("exit", stop)
  try {
    makeCertificates(dir)
    if (owner !== undefined) chownTree(dir, owner)
    asOwner("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
    const port = await freePort()
    Fs.appendFileSync(
      Path.join(data, "postgresql.conf"),
      [
        "",
        "listen_addresses = '127.0.0.1'",
        `port = ${port}`,
        `unix_socket_directories = '${dir}'`,
        "fsync = off",
        "max_connections = 30",
        "include 'tls.conf'",
        ""
      ].join("\n")
    )
    Fs.writeFileSync(Path.join(data, "pg_hba.conf"), hba)
    let current: ServerSettings = { ssl: true, certificate: "server" }
    const writeSettings = (settings: ServerSettings) => {
      const path = Path.join(data, "tls.conf")
      Fs.writeFileSync(path, settingsFile(dir, settings))
      if (owner !== undefined) Fs.chownSync(path, owner.uid, owner.gid)
      current = settings
    }
    writeSettings(current)
    startServer()

    const url = (options: UrlOptions = {}) => {
      const query = Object.entries(options.params ?? {}).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&")
      return `postgres://${options.user ?? "postgres"}@${options.host ?? "127.0.0.1"}:${port}/${options.database ?? "svc"}${query === "" ? "" : `?${query}`}`
    }
    const admin = new pg.Client({ connectionString: url({ database: "postgres" }), connectionTimeoutMillis: 5000 })
    await admin.connect()
    try {
      await admin.query("CREATE DATABASE svc")
      await admin.query("CREATE DATABASE tlsonly")
      await admin.query("CREATE ROLE certuser LOGIN")
    } finally {
      await admin.end()
    }

    const serve = (settings: ServerSettings) => {
      if (settings.ssl === current.ssl && settings.certificate === current.certificate) return
      stopServer("fast")
      writeSettings(settings)
      startServer()
    }
    return { port, dir, file: (name) => Path.join(dir, name), url, serve, stop }
  } catch (error) {
    stop()
    throw error
  }
}
