/**
 * `svc --smart` as a user starts it (the built command, its own process): the secrets come from the
 * environment or a flag and never reach the log or the terminal's standard error, a generated one is not
 * shown when standard error is not a terminal, the demo login is announced as a warning, and the server
 * serves the authorization server and refuses FHIR requests without a token.
 */
import { describe, expect, it } from "vitest"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Redacted } from "effect"
import { resolveSecrets } from "../../src/auth/SmartSecrets.ts"
import { startSvc } from "../support/process.ts"

const scratch = () => mkdtempSync(join(tmpdir(), "svc-smart-cli-"))

const form = (fields: Record<string, string>, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
  body: new URLSearchParams(fields).toString()
})

describe("svc --smart", () => {
  it("takes its secrets from the environment and a flag, keeps them out of its output, and refuses FHIR requests without a token", async () => {
    const confidential = "environment-confidential-secret-4f1c"
    const dcr = "flag-dcr-token-9e27b1"
    const server = await startSvc(["--memory", "--smart", "--smart-demo-login", "--smart-dcr-token", dcr], {
      cwd: scratch(),
      env: { SVC_SMART_CONFIDENTIAL_SECRET: confidential }
    })
    try {
      await server.logged("serving")
      const warning = server.lines().map((line) => JSON.parse(line)).find((entry) => String(entry.message).includes("demo_login"))
      expect(warning).toMatchObject({ level: "warn" })

      expect((await fetch(`${server.url}/fhir/Patient`)).status).toBe(401)
      const issued = await fetch(`${server.url}/auth/token`, form({ grant_type: "client_credentials", scope: "system/*.rs" }, {
        authorization: `Basic ${Buffer.from(`svc-confidential:${confidential}`).toString("base64")}`
      }))
      expect(issued.status).toBe(200)
      const token = ((await issued.json()) as { access_token: string }).access_token
      expect((await fetch(`${server.url}/fhir/Patient`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200)
      expect((await fetch(`${server.url}/healthz?verbose=1`)).status).toBe(401)
      const verbose = await fetch(`${server.url}/healthz?verbose=1`, { headers: { authorization: `Bearer ${token}` } })
      expect(verbose.status).toBe(200)
      expect(await verbose.json()).toHaveProperty("database")

      const registered = await fetch(`${server.url}/auth/register`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${dcr}` },
        body: JSON.stringify({ client_name: "cli", grant_types: ["client_credentials"], token_endpoint_auth_method: "client_secret_basic" })
      })
      expect(registered.status).toBe(201)
      const clientSecret = ((await registered.json()) as { client_secret: string }).client_secret

      const finished = await server.stop()
      expect(finished.code).toBe(0)
      const output = `${finished.stdout}\n${finished.stderr}`
      for (const secret of [confidential, dcr, token, clientSecret]) expect(output).not.toContain(secret)
      // Not a terminal: nothing generated is shown (both secrets were given anyway).
      expect(finished.stderr).not.toContain("generated")
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("generates the secrets it is not given, announcing each once", () => {
    const announced: Array<string> = []
    const given = Redacted.make("given-token")
    const secrets = resolveSecrets({ dcrToken: given, confidentialSecret: undefined, oidcClientSecret: undefined }, (name, value) => announced.push(`${name}=${value}`))
    expect(Redacted.value(secrets.dcrToken)).toBe("given-token")
    const generated = Redacted.value(secrets.confidentialSecret)
    expect(generated).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(announced).toEqual([`SVC_SMART_CONFIDENTIAL_SECRET=${generated}`])
  })
})
