/**
 * Postgres TLS from libpq-style URL parameters (interface spec, Versioning item 6):
 * `sslmode`, `sslrootcert`, `sslcert`, `sslkey` and `sslnegotiation`, mapped onto node-postgres' options.
 */
import { Either } from "effect"
import * as Fs from "node:fs"
import * as Tls from "node:tls"

export type SslMode = "disable" | "prefer" | "require" | "verify-ca" | "verify-full"

/** How TLS starts: after Postgres' SSLRequest, or directly (Postgres 17 and later). */
export type SslNegotiation = "postgres" | "direct"

const modes: ReadonlyArray<SslMode> = ["disable", "prefer", "require", "verify-ca", "verify-full"]

/** A Postgres URL split into what node-postgres reads and the TLS settings we apply ourselves. */
export interface PostgresTarget {
  /** The URL without the ssl* parameters (node-postgres would otherwise apply its own reading of them). */
  readonly connectionString: string
  readonly host: string
  readonly unixSocket: boolean
  readonly mode: SslMode
  readonly negotiation: SslNegotiation
  readonly rootcert?: string | undefined
  readonly cert?: string | undefined
  readonly key?: string | undefined
}

/** The PEM contents of the files a target names. */
export interface TlsFiles {
  readonly ca?: string | undefined
  readonly cert?: string | undefined
  readonly key?: string | undefined
}

/** The URL with any password replaced by `***`, for messages and logs. */
export const maskUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password === "") return url
    parsed.password = "xxx"
    return parsed.toString().replace(/:xxx@/, ":***@")
  } catch {
    return url.replace(/(\/\/[^:/@]*:)[^@]*@/, "$1***@")
  }
}

/** Reads the TLS parameters of a URL, refusing the combinations the spec forbids. */
export const parsePostgresUrl = (url: string): Either.Either<PostgresTarget, string> => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return Either.left("the Postgres URL cannot be read")
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    return Either.left(`the Postgres URL must start with postgres:// (got ${parsed.protocol}//)`)
  }
  const params = parsed.searchParams
  if (params.has("ssl")) return Either.left("the ssl parameter is not supported; use sslmode")
  const rawMode = params.get("sslmode") ?? "disable"
  if (rawMode === "allow") {
    return Either.left("sslmode=allow is not supported; use disable, prefer, require, verify-ca or verify-full")
  }
  const mode = modes.find((m) => m === rawMode)
  if (mode === undefined) {
    return Either.left(`unknown sslmode "${rawMode}"; use disable, prefer, require, verify-ca or verify-full`)
  }
  const rootcert = params.get("sslrootcert") ?? undefined
  const cert = params.get("sslcert") ?? undefined
  const key = params.get("sslkey") ?? undefined
  if (mode === "disable" && (rootcert !== undefined || cert !== undefined || key !== undefined)) {
    return Either.left("sslrootcert, sslcert and sslkey cannot be used with sslmode=disable")
  }
  if ((mode === "verify-ca" || mode === "verify-full") && rootcert === undefined) {
    return Either.left(`sslmode=${mode} needs sslrootcert (there is no system trust store fallback)`)
  }
  if ((cert === undefined) !== (key === undefined)) {
    return Either.left("give both sslcert and sslkey, or neither")
  }
  const negotiation = params.get("sslnegotiation") ?? "postgres"
  if (negotiation !== "postgres" && negotiation !== "direct") {
    return Either.left(`unknown sslnegotiation "${negotiation}"; use postgres or direct`)
  }
  // As libpq: a direct start has no SSLRequest answer to fall back on, so the weak modes are refused.
  if (negotiation === "direct" && (mode === "disable" || mode === "prefer")) {
    return Either.left(`sslnegotiation=direct needs sslmode=require, verify-ca or verify-full (got ${mode})`)
  }
  // node-postgres would read these itself: sslnegotiation=direct there means TLS with its defaults
  // (the system's trust store), replacing the options made here.
  for (const name of ["sslmode", "sslrootcert", "sslcert", "sslkey", "sslnegotiation"]) params.delete(name)
  const host = params.get("host") ?? decodeURIComponent(parsed.hostname)
  return Either.right({
    connectionString: parsed.toString(),
    host,
    unixSocket: host.startsWith("/"),
    mode,
    negotiation,
    rootcert,
    cert,
    key
  })
}

/** The spec demands the name in subjectAltName; a common name alone is not accepted. */
const checkSubjectAltName = (host: string, cert: Tls.PeerCertificate): Error | undefined =>
  cert.subjectaltname === undefined || cert.subjectaltname === ""
    ? new Error(`the server certificate has no subjectAltName for ${host}`)
    : Tls.checkServerIdentity(host, cert)

const skipHostCheck = (): undefined => undefined

/** node-postgres' `ssl` option for a target, given the contents of its files. */
export const sslOptions = (target: PostgresTarget, files: TlsFiles): false | Tls.ConnectionOptions => {
  if (target.mode === "disable" || target.unixSocket) return false
  const clientCert = files.cert !== undefined && files.key !== undefined ? { cert: files.cert, key: files.key } : {}
  switch (target.mode) {
    case "prefer":
      return { rejectUnauthorized: false, ...clientCert }
    case "require":
      return files.ca === undefined
        ? { rejectUnauthorized: false, ...clientCert }
        : { rejectUnauthorized: true, ca: files.ca, checkServerIdentity: skipHostCheck, ...clientCert }
    case "verify-ca":
      return { rejectUnauthorized: true, ca: files.ca, checkServerIdentity: skipHostCheck, ...clientCert }
    case "verify-full":
      return { rejectUnauthorized: true, ca: files.ca, checkServerIdentity: checkSubjectAltName, ...clientCert }
  }
}

/**
 * The TLS settings of one node-postgres connection. Both are always given, so node-postgres does not
 * fall back to the `PGSSLMODE` or `PGSSLNEGOTIATION` environment variables.
 */
export const clientTls = (
  target: PostgresTarget,
  ssl: false | Tls.ConnectionOptions
): { readonly ssl: false | Tls.ConnectionOptions; readonly sslnegotiation: SslNegotiation } => ({
  ssl,
  sslnegotiation: ssl === false ? "postgres" : target.negotiation
})

/**
 * The current `ssl` option of a target: the files are read again when their modification time
 * changes, so rotated certificates apply to new connections. Throws with a plain message when a
 * file cannot be read.
 */
export const tlsLoader = (target: PostgresTarget): () => false | Tls.ConnectionOptions => {
  if (target.mode === "disable" || target.unixSocket) return () => false
  const cache = new Map<string, { readonly mtimeMs: number; readonly text: string }>()
  const read = (path: string | undefined, what: string): string | undefined => {
    if (path === undefined) return undefined
    let mtimeMs: number
    try {
      mtimeMs = Fs.statSync(path).mtimeMs
    } catch {
      throw new Error(`${what} file ${path} does not exist or cannot be read`)
    }
    const cached = cache.get(path)
    if (cached !== undefined && cached.mtimeMs === mtimeMs) return cached.text
    const text = Fs.readFileSync(path, "utf8")
    cache.set(path, { mtimeMs, text })
    return text
  }
  return () =>
    sslOptions(target, {
      ca: read(target.rootcert, "sslrootcert"),
      cert: read(target.cert, "sslcert"),
      key: read(target.key, "sslkey")
    })
}
