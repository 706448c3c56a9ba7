/**
 * The authorization server's secrets (spec: Authentication 4; Command line 8): the DCR token, which
 * registers clients and creates EHR launches, and the secret of the built-in confidential client. Each comes
 * from its flag (`--smart-dcr-token`, `--smart-confidential-secret`), else from the environment
 * (`SVC_SMART_DCR_TOKEN`, `SVC_SMART_CONFIDENTIAL_SECRET`), else is generated at start and printed once to
 * stderr when stderr is a terminal, never to the log. The log's redaction (src/config/Secrets.ts) masks them
 * wherever they appear.
 */
import { Context, Redacted } from "effect"
import { generateSecret } from "./secrets.ts"

export interface SmartSecretValues {
  readonly dcrToken: Redacted.Redacted<string>
  readonly confidentialSecret: Redacted.Redacted<string>
  readonly oidcClientSecret: Redacted.Redacted<string> | undefined
}

export class SmartSecrets extends Context.Tag("svc/auth/SmartSecrets")<SmartSecrets, SmartSecretValues>() {}

const generate = (): Redacted.Redacted<string> => Redacted.make(generateSecret())

/** Secrets made up on the spot (a server started without any, as tests do). */
export const generatedSecrets = (): SmartSecretValues => ({ dcrToken: generate(), confidentialSecret: generate(), oidcClientSecret: undefined })

/**
 * The secrets from the flags or the environment, with the missing ones generated; `announce` is told each
 * generated one (by name) so that it can be shown once.
 */
export const resolveSecrets = (
  given: { readonly dcrToken: Redacted.Redacted<string> | undefined; readonly confidentialSecret: Redacted.Redacted<string> | undefined; readonly oidcClientSecret: Redacted.Redacted<string> | undefined },
  announce: (name: string, value: string) => void
): SmartSecretValues => {
  const pick = (value: Redacted.Redacted<string> | undefined, name: string) => {
    if (value !== undefined) return value
    const made = generate()
    announce(name, Redacted.value(made))
    return made
  }
  return {
    dcrToken: pick(given.dcrToken, "SVC_SMART_DCR_TOKEN"),
    confidentialSecret: pick(given.confidentialSecret, "SVC_SMART_CONFIDENTIAL_SECRET"),
    oidcClientSecret: given.oidcClientSecret
  }
}
