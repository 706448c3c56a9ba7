/**
 * Secrets come from the environment only, never from svc.toml, and are masked in every log line.
 * Spec: interface.md "Authentication" item 4 and the audit hash-chain key under "Limits".
 */
import { Effect, Redacted } from "effect"
import { ConfigError } from "./ConfigError.ts"

export interface Secrets {
  readonly oidcClientSecret: Redacted.Redacted<string> | undefined
  readonly smartDcrToken: Redacted.Redacted<string> | undefined
  readonly smartConfidentialSecret: Redacted.Redacted<string> | undefined
  readonly s3AccessKeyId: Redacted.Redacted<string> | undefined
  readonly s3SecretAccessKey: Redacted.Redacted<string> | undefined
  readonly auditKey: Redacted.Redacted<string> | undefined
  /** Passwords of URLs in the configuration (the Postgres URL above all). */
  readonly urlPasswords: ReadonlyArray<Redacted.Redacted<string>>
}

export const noSecrets: Secrets = {
  oidcClientSecret: undefined,
  smartDcrToken: undefined,
  smartConfidentialSecret: undefined,
  s3AccessKeyId: undefined,
  s3SecretAccessKey: undefined,
  auditKey: undefined,
  urlPasswords: []
}

export const AUDIT_KEY_MIN_BYTES = 16

const MASK = "***"

const fromEnv = (env: Record<string, string | undefined>, name: string): Redacted.Redacted<string> | undefined => {
  const value = env[name]
  return value === undefined || value === "" ? undefined : Redacted.make(value)
}

const urlPassword = (text: string): string | undefined => {
  try {
    const url = new URL(text)
    return url.password !== "" ? url.password : (url.searchParams.get("password") ?? undefined)
  } catch {
    return undefined
  }
}

const stringsIn = (value: unknown): ReadonlyArray<string> =>
  typeof value === "string"
    ? [value]
    : typeof value === "object" && value !== null
    ? Object.values(value).flatMap(stringsIn)
    : []

/** Reads the secret variables; `config` is searched for URLs that carry a password. */
export const readSecrets = (
  env: Record<string, string | undefined>,
  config: unknown
): Effect.Effect<Secrets, ConfigError> => {
  const auditKey = fromEnv(env, "SVC_AUDIT_KEY")
  if (auditKey !== undefined) {
    const bytes = Buffer.byteLength(Redacted.value(auditKey), "utf8")
    if (bytes < AUDIT_KEY_MIN_BYTES) {
      return Effect.fail(
        new ConfigError({
          message: `SVC_AUDIT_KEY: expected at least ${AUDIT_KEY_MIN_BYTES} bytes, got ${bytes} bytes`
        })
      )
    }
  }
  const passwords = stringsIn(config).flatMap((s) => {
    const password = urlPassword(s)
    return password === undefined || password === "" ? [] : [Redacted.make(password)]
  })
  return Effect.succeed({
    oidcClientSecret: fromEnv(env, "SVC_OIDC_CLIENT_SECRET"),
    smartDcrToken: fromEnv(env, "SVC_SMART_DCR_TOKEN"),
    smartConfidentialSecret: fromEnv(env, "SVC_SMART_CONFIDENTIAL_SECRET"),
    s3AccessKeyId: fromEnv(env, "SVC_S3_ACCESS_KEY_ID"),
    s3SecretAccessKey: fromEnv(env, "SVC_S3_SECRET_ACCESS_KEY"),
    auditKey,
    urlPasswords: passwords
  })
}

// The password ends before the first "@", "/", "?" or "#", so a port is never taken for one.
// A URL's user and password never hold quotes, commas or spaces unescaped, so a match cannot run across JSON fields.
const USERINFO_PASSWORD = /([a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^\s:/?#@"',]*:)([^\s@/?#"',]*)@/g
const QUERY_PASSWORD = /([?&]password=)([^&#\s]*)/gi

const PASSWORD_PARAMETER = /password=/i

/**
 * Masks the password of a URL (user-info or libpq `password=` parameter); other text is left alone. Every log
 * line passes here: a text without `://` or `password=` (most lines) is only looked through for those, which
 * costs a fraction of trying the patterns at each of its characters.
 */
export const redactUrl = (url: string): string => {
  let out = url
  if (out.includes("://")) out = out.replace(USERINFO_PASSWORD, `$1${MASK}@`)
  if (PASSWORD_PARAMETER.test(out)) out = out.replace(QUERY_PASSWORD, `$1${MASK}`)
  return out
}

const secretValuesOf = new WeakMap<Secrets, ReadonlyArray<string>>()

/** The texts to mask, worked out once per Secrets (every log line is redacted: this is on every request's way). */
const secretValues = (secrets: Secrets): ReadonlyArray<string> => {
  let values = secretValuesOf.get(secrets)
  if (values === undefined) {
    values = masked(secrets)
    secretValuesOf.set(secrets, values)
  }
  return values
}

const masked = (secrets: Secrets): ReadonlyArray<string> => {
  const values = [
    secrets.oidcClientSecret,
    secrets.smartDcrToken,
    secrets.smartConfidentialSecret,
    secrets.s3AccessKeyId,
    secrets.s3SecretAccessKey,
    secrets.auditKey,
    ...secrets.urlPasswords
  ].flatMap((secret) => {
    if (secret === undefined) return []
    const value = Redacted.value(secret)
    // A URL password may be logged percent-encoded or decoded.
    let decoded = value
    try {
      decoded = decodeURIComponent(value)
    } catch {
      // not percent-encoded
    }
    return [value, decoded, encodeURIComponent(value)].filter((v) => v !== "")
  })
  // Longest first, so a secret that contains another is masked whole.
  return [...new Set(values)].sort((a, b) => b.length - a.length)
}

/** Replaces every secret value and every URL password in `text` with `***`. */
export const redact = (text: string, secrets: Secrets): string => {
  let out = redactUrl(text)
  for (const value of secretValues(secrets)) if (out.includes(value)) out = out.split(value).join(MASK)
  return out
}
