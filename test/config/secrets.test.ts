import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { noSecrets, redact, redactUrl } from "../../src/config/Secrets.ts"
import { load, loadToml, tempDir } from "./support.ts"

const secretEnv = {
  SVC_OIDC_CLIENT_SECRET: "oidc-secret-value",
  SVC_SMART_DCR_TOKEN: "dcr-token-value",
  SVC_SMART_CONFIDENTIAL_SECRET: "confidential-value",
  SVC_S3_ACCESS_KEY_ID: "AKIAEXAMPLEKEY",
  SVC_S3_SECRET_ACCESS_KEY: "s3-secret-access-key",
  SVC_AUDIT_KEY: "a-long-enough-audit-key"
}

describe("redactUrl", () => {
  it("masks the password of a URL and keeps the rest", () => {
    expect(redactUrl("postgres://svc:p4ss@db.example.org:5432/svc?sslmode=require"))
      .toBe("postgres://svc:***@db.example.org:5432/svc?sslmode=require")
  })
  it("masks a libpq password parameter", () => {
    expect(redactUrl("postgres://db/svc?user=svc&password=p4ss&sslmode=require"))
      .toBe("postgres://db/svc?user=svc&password=***&sslmode=require")
  })
  it("leaves a URL with a port and no password alone", () => {
    expect(redactUrl("http://host:8080/path@x")).toBe("http://host:8080/path@x")
    expect(redactUrl("postgres://svc@db:5432/svc")).toBe("postgres://svc@db:5432/svc")
  })
  it("does not run across the fields of a JSON log line", () => {
    const line = JSON.stringify({ source: "registry https://registry.example.org", resources: 3032, from: "a.b@4.0.1" })
    expect(redactUrl(line)).toBe(line)
  })
  it("masks URLs inside a longer line", () => {
    expect(redactUrl("connecting to postgres://svc:p4ss@db/svc failed")).toBe("connecting to postgres://svc:***@db/svc failed")
  })
})

layer(NodeFileSystem.layer)("secrets", (it) => {
  it.scoped("are read from the environment and held as Redacted", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { secrets } = yield* load({ cwd: dir, env: secretEnv })
      expect(secrets.oidcClientSecret && Redacted.value(secrets.oidcClientSecret)).toBe("oidc-secret-value")
      expect(secrets.smartDcrToken && Redacted.value(secrets.smartDcrToken)).toBe("dcr-token-value")
      expect(secrets.smartConfidentialSecret && Redacted.value(secrets.smartConfidentialSecret)).toBe("confidential-value")
      expect(secrets.s3AccessKeyId && Redacted.value(secrets.s3AccessKeyId)).toBe("AKIAEXAMPLEKEY")
      expect(secrets.s3SecretAccessKey && Redacted.value(secrets.s3SecretAccessKey)).toBe("s3-secret-access-key")
      expect(secrets.auditKey && Redacted.value(secrets.auditKey)).toBe("a-long-enough-audit-key")
      expect(String(secrets.smartDcrToken)).not.toContain("dcr-token-value")
      expect(JSON.stringify(secrets)).not.toContain("value")
    }))

  it.scoped("are absent when their variables are unset or empty", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { secrets } = yield* load({ cwd: dir, env: { SVC_SMART_DCR_TOKEN: "" } })
      expect(secrets).toEqual(noSecrets)
    }))

  it.scoped("redact masks every secret value in a log line", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { secrets } = yield* load({ cwd: dir, env: secretEnv })
      const line = Object.values(secretEnv).join(" | ")
      expect(redact(line, secrets)).toBe("*** | *** | *** | *** | *** | ***")
    }))

  it.scoped("redact masks the configured Postgres password, also where it appears alone or decoded", () =>
    Effect.gen(function*() {
      const { secrets } = yield* loadToml(`[database]\npostgres_url = "postgres://svc:p%40ss-word@db/svc"\n`)
      expect(redact("url postgres://svc:p%40ss-word@db/svc", secrets)).toBe("url postgres://svc:***@db/svc")
      expect(redact("auth failed for password p@ss-word", secrets)).toBe("auth failed for password ***")
      expect(redact("raw p%40ss-word", secrets)).toBe("raw ***")
    }))

  it.scoped("redact masks a Postgres password that came from SVC_POSTGRES_URL", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const { secrets } = yield* load({ cwd: dir, env: { SVC_POSTGRES_URL: "postgres://svc:topsecret@db/svc" } })
      expect(redact("bad password topsecret", secrets)).toBe("bad password ***")
    }))
})
