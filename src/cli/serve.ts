/** `svc` without a subcommand: load the configuration, refuse what this build lacks, run the server. */
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { loadAppConfig } from "../config/load.ts"
import { redact } from "../config/Secrets.ts"
import { start } from "../app/Start.ts"
import { layer as readinessLayer } from "../http/Readiness.ts"
import { servingAppLayer } from "../http/Server.ts"
import * as Log from "../logging/Log.ts"
import type { FlagSettings } from "./settings.ts"
import { refuseUnavailable } from "./unavailable.ts"

export interface ServeInput {
  readonly configPath: string | undefined
  readonly settings: FlagSettings
  readonly named: ReadonlyArray<string>
}

export const runServe = (input: ServeInput) =>
  Effect.gen(function*() {
    const loaded = yield* loadAppConfig({
      flags: input.settings,
      configPath: input.configPath,
      env: process.env,
      cwd: process.cwd()
    }).pipe(Effect.provide(NodeFileSystem.layer))
    yield* refuseUnavailable(loaded.config, input.named)
    const sink = Log.stdoutSink((text) => redact(text, loaded.secrets))
    const runtime = Layer.mergeAll(Log.layer(loaded.config.server.log_level), readinessLayer, servingAppLayer).pipe(
      Layer.provideMerge(sink)
    )
    yield* Effect.scoped(Effect.zipRight(start(loaded.config), Effect.never)).pipe(Effect.provide(runtime))
  })
