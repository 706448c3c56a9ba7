/**
 * The svc of a run with SMART App Launch on (`smart.enabled`, docs/smart.md), whose callers are known by
 * bearer tokens: what a token costs on the read and search path is its workloads' rate against the same
 * workloads on the svc without `--smart` of the same run. The tokens come from the built-in confidential
 * client by `client_credentials` (RFC 6749 4.4, authenticated by HTTP Basic, 2.3.1), its secret made up for
 * the run and handed to the server in the environment; neither is ever printed.
 */
import { randomBytes } from "node:crypto"
import type { Child } from "./children.ts"
import { type Backend, startSvc } from "./servers.ts"

/** The configuration of the svc with SMART on: every other setting at its default (governance included). */
export const smartConfig = "# svc bench: SMART App Launch on\n[smart]\nenabled = true\n"

/** The built-in confidential client (docs/smart-clients.md). */
const confidentialClient = "svc-confidential"

export interface SmartSvc {
  readonly child: Child
  /** The `Authorization` header of a new access token granting `scope` (space-separated scopes). */
  readonly authorization: (scope: string) => Promise<Readonly<Record<string, string>>>
}

/** `POST /auth/token` with `grant_type=client_credentials`: the access token, or an error naming the status (never a secret). */
const clientCredentials = async (url: string, secret: string, scope: string): Promise<string> => {
  const basic = Buffer.from(`${encodeURIComponent(confidentialClient)}:${encodeURIComponent(secret)}`).toString("base64")
  const response = await fetch(`${url}/auth/token`, {
    method: "POST",
    headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({ grant_type: "client_credentials", scope }).toString()
  })
  const answer = (await response.json().catch(() => ({}))) as { access_token?: unknown; error?: unknown; error_description?: unknown }
  if (response.status !== 200 || typeof answer.access_token !== "string") {
    throw new Error(`POST /auth/token (client_credentials, scope ${scope}) answered ${response.status}: ${String(answer.error ?? "")} ${String(answer.error_description ?? "")}`)
  }
  return answer.access_token
}

/** Starts svc on `backend` with SMART on and a confidential secret of the run's own. */
export const startSmartSvc = async (backend: Backend, workDir: string): Promise<SmartSvc> => {
  const secret = randomBytes(32).toString("base64url")
  const child = await startSvc(backend, workDir, undefined, {
    name: `svc-${backend.kind}-smart`,
    config: smartConfig,
    env: { SVC_SMART_CONFIDENTIAL_SECRET: secret }
  })
  return {
    child,
    authorization: async (scope) => ({ authorization: `Bearer ${await clientCredentials(child.url, secret, scope)}` })
  }
}
