/** `svc` without a subcommand: load the configuration, refuse what this build lacks, run the server. */
import { NodeFileSystem } from "@effect/platform-node"
import { Duration, Effect, Layer, Redacted } from "effect"
import { resolveSecrets, SmartSecrets } from "../auth/SmartSecrets.ts"
import { loadAppConfig } from "../config/load.ts"
import { redact } from "../config/Secrets.ts"
import { start } from "../app/Start.ts"
import { AuditKey } from "../governance/audit/AuditTrail.ts"
import { layer as readinessLayer } from "../http/Readiness.ts"
import { drainTimeout, servingAppLayer } from "../http/Server.ts"
import * as Log from "../logging/Log.ts"
import type { FlagSettings } from "./settings.ts"
import { refuseUnavailable } from "./unavailable.ts"

export interface ServeInput {
  readonly configPath: string | undefined
  readonly settings: FlagSettings
  readonly named: ReadonlyArray<string>
  /** `--smart-dcr-token`, `--smart-confidential-secret`: secrets that have no setting in the file. */
  readonly smartSecrets?: { readonly dcrToken: string | undefined; readonly confidentialSecret: string | undefined }
}

const redacted = (value: string | undefined) => (value === undefined || value === "" ? undefined : Redacted.make(value))

export const runServe = (input: ServeInput) =>
  Effect.gen(function*() {
    const loaded = yield* loadAppConfig({
      flags: input.settings,
      configPath: input.configPath,
      env: process.env,
      cwd: process.cwd()
    }).pipe(Effect.provide(NodeFileSystem.layer))
    yield* refuseUnavailable(loaded.config, input.named)
    // A generated secret is shown once, on a terminal only; it never reaches the log (Command line 8).
    const smartSecrets = resolveSecrets({
      dcrToken: redacted(input.smartSecrets?.dcrToken) ?? loaded.secrets.smartDcrToken,
      confidentialSecret: redacted(input.smartSecrets?.confidentialSecret) ?? loaded.secrets.smartConfidentialSecret,
      oidcClientSecret: loaded.secrets.oidcClientSecret
    }, (name, value) => {
      if (loaded.config.smart.enabled && process.stderr.isTTY) process.stderr.write(`svc: generated ${name} (shown once): ${value}\n`)
    })
    const secrets = { ...loaded.secrets, smartDcrToken: smartSecrets.dcrToken, smartConfidentialSecret: smartSecrets.confidentialSecret }
    const sink = Log.stdoutSink((text) => redact(text, secrets))
    const runtime = Layer.mergeAll(Log.layer(loaded.config.server.log_level), readinessLayer, servingAppLayer).pipe(
      Layer.provideMerge(sink)
    )
    yield* Effect.scoped(Effect.gen(function*() {
      // The audit chain's key is a secret: it comes from the environment, not the configuration.
      const started = yield* start(loaded.config, Layer.succeed(AuditKey, loaded.secrets.auditKey)).pipe(Effect.provideService(SmartSecrets, smartSecrets))
      // Registered last, so it is armed first when shutdown begins.
      yield* Effect.addFinalizer(() => Effect.sync(armShutdownLimit))
      // Serves until stopped, or until another process takes the writer lease: then it stops, and exits with status 1.
      return yield* started.leaseLost
    })).pipe(Effect.provide(runtime))
  })

/**
 * The longest a shutdown may take (docs/operations.md, "Shutdown"): the server's drain (at most
 * `drainTimeout`) and then closing the database. Past it the process leaves with status 1, whatever
 * is still running; an unref'd timer, so it never holds a process that is done.
 */
export const shutdownLimit = Duration.sum(drainTimeout, Duration.seconds(5))

const armShutdownLimit = () => {
  const timer = setTimeout(() => {
    process.stderr.write(`svc: shutdown took more than ${Duration.format(shutdownLimit)}; exiting without finishing it\n`)
    process.exit(1)
  }, Duration.toMillis(shutdownLimit))
  timer.unref()
}
