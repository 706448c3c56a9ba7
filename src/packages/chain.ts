/**
 * The sources tried, in order. `conformance.package_registry` names one source; unset, the chain is the
 * FHIR package registry, its second server, then whatever registry npm on this machine is configured
 * with (asked at run time, never written down).
 */
import { Config, Effect, Option } from "effect"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { expandHome } from "./PackageSpec.ts"
import type { HttpTimeouts } from "./http.ts"
import { mirrorSource } from "./sources/mirror.ts"
import { registrySource } from "./sources/registry.ts"
import { s3Source, type S3Settings } from "./sources/s3.ts"
import type { PackageSource } from "./sources/Source.ts"

export const fhirRegistries: ReadonlyArray<string> = ["https://packages.fhir.org", "https://packages2.fhir.org/packages"]

const httpUrl = (text: string): Option.Option<string> =>
  /^https?:\/\/\S+$/.test(text.trim()) ? Option.some(text.trim()) : Option.none()

/** `npm_config_registry` when set (npm sets it for scripts it runs), else `npm config get registry`. */
export const npmRegistry: Effect.Effect<Option.Option<string>> = Effect.gen(function*() {
  const fromEnv = yield* Config.option(Config.string("npm_config_registry")).pipe(Effect.orElseSucceed(() => Option.none()))
  if (Option.isSome(fromEnv)) return httpUrl(fromEnv.value)
  const output = yield* Effect.tryPromise(() =>
    promisify(execFile)("npm", ["config", "get", "registry"], { timeout: 15_000, windowsHide: true })
  ).pipe(Effect.option)
  return Option.flatMap(output, ({ stdout }) => httpUrl(stdout))
})

export const sourceFor = (location: string, s3: S3Settings, timeouts: HttpTimeouts): PackageSource => {
  if (location.startsWith("s3://")) return s3Source(location, s3, timeouts)
  if (/^https?:\/\//.test(location)) return registrySource(location, timeouts)
  return mirrorSource(expandHome(location.replace(/^file:\/\//, "")))
}

export interface ChainOptions {
  /** `conformance.package_registry` (several: tried in order); unset means the default chain. */
  readonly registry?: string | ReadonlyArray<string> | undefined
  readonly s3: S3Settings
  readonly timeouts: HttpTimeouts
  /** How the npm registry is found; tests replace it. */
  readonly npmRegistry?: Effect.Effect<Option.Option<string>> | undefined
}

export const chain = (options: ChainOptions): Effect.Effect<ReadonlyArray<PackageSource>> =>
  Effect.gen(function*() {
    const { registry } = options
    if (registry !== undefined) {
      return (typeof registry === "string" ? [registry] : registry).map((r) => sourceFor(r, options.s3, options.timeouts))
    }
    const npm = yield* (options.npmRegistry ?? npmRegistry)
    const urls = Option.match(npm, {
      onNone: () => fhirRegistries,
      onSome: (url) => fhirRegistries.includes(url.replace(/\/+$/, "")) ? fhirRegistries : [...fhirRegistries, url]
    })
    return urls.map((url) => registrySource(url, options.timeouts))
  })
