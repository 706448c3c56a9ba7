/**
 * `svc migrate --status | --dry-run` (spec: Versioning item 5): prints what the database records and
 * what this build would apply, changing nothing. Exit 0: would start; 1: would refuse; 2: cannot read.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { databaseOptions } from "../app/AppLayer.ts"
import { loadAppConfig } from "../config/load.ts"
import { formatStatus, status, statusExitCode } from "../db/MigrationStatus.ts"
import { ExitWith } from "./errors.ts"
import type { FlagSettings } from "./settings.ts"

export interface MigrateInput {
  readonly configPath: string | undefined
  readonly settings: FlagSettings
  readonly withSql: boolean
}

export const runMigrate = (input: MigrateInput) =>
  Effect.gen(function*() {
    const { config } = yield* loadAppConfig({
      flags: input.settings,
      configPath: input.configPath,
      env: process.env,
      cwd: process.cwd()
    }).pipe(Effect.provide(NodeFileSystem.layer))
    const report = yield* status({ ...databaseOptions(config), withSql: input.withSql, fhirVersion: config.fhir.version })
    yield* Console.log(formatStatus(report))
    const code = statusExitCode(report)
    if (code !== 0) return yield* new ExitWith({ code })
  })
