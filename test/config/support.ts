/** Shared helpers for the config tests: a temp directory per test and a loader with no etc file. */
import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import * as Path from "node:path"
import type { FlagSettings } from "../../src/config/AppConfig.ts"
import { type ConfigInput, loadAppConfig } from "../../src/config/load.ts"

export const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "svc-config-" }))

export const write = (dir: string, name: string, text: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => {
    const file = Path.join(dir, name)
    return fs.makeDirectory(Path.dirname(file), { recursive: true }).pipe(
      Effect.zipRight(fs.writeFileString(file, text)),
      Effect.as(file)
    )
  })

export interface TestInput {
  readonly cwd: string
  readonly flags?: FlagSettings
  readonly env?: Record<string, string | undefined>
  readonly configPath?: string
  readonly etcPath?: string
}

export const load = (input: TestInput) => {
  const full: ConfigInput = {
    flags: input.flags ?? {},
    env: input.env ?? {},
    cwd: input.cwd,
    configPath: input.configPath,
    etcPath: input.etcPath ?? Path.join(input.cwd, "no-etc", "svc.toml")
  }
  return loadAppConfig(full)
}

/** The message a user would read when loading fails. */
export const loadError = (input: TestInput) =>
  load(input).pipe(
    Effect.flip,
    Effect.map((e) => e.message)
  )

/** Loads `toml` written as ./svc.toml in a fresh directory. */
export const loadToml = (toml: string, rest: Omit<TestInput, "cwd"> = {}) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    yield* write(dir, "svc.toml", toml)
    return yield* load({ ...rest, cwd: dir })
  })

export const loadTomlError = (toml: string, rest: Omit<TestInput, "cwd"> = {}) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const file = yield* write(dir, "svc.toml", toml)
    const message = yield* loadError({ ...rest, cwd: dir })
    return { file, message }
  })
