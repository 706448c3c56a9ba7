/**
 * Loads the configuration: defaults < svc.toml < SVC_* environment < command-line flags.
 * Spec: interface.md "Command line" rules 1-3 and "Configuration file settings"; docs/configuration.md.
 */
import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as Path from "node:path"
import { parse, TomlError } from "smol-toml"
import { AppConfig, type FlagSettings } from "./AppConfig.ts"
import { ConfigError } from "./ConfigError.ts"
import { describeParseError, onlyFlagsAtFault, showValue, where } from "./describe.ts"
import { isTable, mergeEnv, RawSettings } from "./merge.ts"
import { readSecrets, type Secrets } from "./Secrets.ts"
import { isLoopbackHost, leavesOf, parseBind, settingNames } from "./Setting.ts"

export interface ConfigInput {
  /** Settings named by flags, already typed; they win over everything. */
  readonly flags: FlagSettings
  /** From --config. */
  readonly configPath?: string | undefined
  readonly env: Record<string, string | undefined>
  readonly cwd: string
  /** Defaults to /etc/svc/svc.toml. */
  readonly etcPath?: string | undefined
}

export interface LoadedConfig {
  readonly config: AppConfig
  /** The configuration file that was read, if any. */
  readonly file: string | undefined
  readonly secrets: Secrets
  /** SVC_S3_ENDPOINT: where an s3:// package registry lives (not a secret). */
  readonly s3Endpoint: string | undefined
}

export const ETC_CONFIG_PATH = "/etc/svc/svc.toml"

const LEAVES = leavesOf(AppConfig.ast)
const KNOWN_SETTINGS = settingNames(AppConfig.ast)

const fail = (message: string) => Effect.fail(new ConfigError({ message }))

/** --config, then SVC_CONFIG (both must exist), then ./svc.toml, then the etc path; the first found is used. */
const findConfigFile = (input: ConfigInput) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const exists = (file: string) => fs.exists(file).pipe(Effect.orElseSucceed(() => false))
    const named: ReadonlyArray<readonly [string, string | undefined]> = [
      ["--config", input.configPath],
      ["SVC_CONFIG", input.env["SVC_CONFIG"]]
    ]
    for (const [source, given] of named) {
      if (given === undefined || given === "") continue
      const file = Path.resolve(input.cwd, given)
      if (!(yield* exists(file))) return yield* fail(`${source} ${given}: the configuration file does not exist`)
      const info = yield* fs.stat(file).pipe(Effect.option)
      if (info._tag === "Some" && info.value.type === "Directory") return yield* fail(`${source} ${given}: is a directory, not a configuration file`)
      return file
    }
    for (const file of [Path.join(input.cwd, "svc.toml"), input.etcPath ?? ETC_CONFIG_PATH]) {
      if (yield* exists(file)) return file
    }
    return undefined
  })

const readToml = (file: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(file).pipe(
      Effect.mapError((e) => new ConfigError({ message: `${file}: cannot read the configuration file (${e.message})` }))
    )
    return yield* Effect.try({
      try: () => parse(text, { unsafeKeyBehaviour: "throw" }),
      catch: (e) => {
        if (e instanceof TomlError) {
          const reason = (e.message.split("\n")[0] ?? "").replace(/^Invalid TOML document: /, "")
          return new ConfigError({ message: `${file}:${e.line}:${e.column}: malformed TOML: ${reason}` })
        }
        return new ConfigError({ message: `${file}: malformed TOML` })
      }
    })
  })

const DATABASE_CHOICE = [["database", "kind"], ["database", "sqlite_path"], ["database", "postgres_url"]] as const

/** Merges the layers; a database named by flags replaces the one the file or environment named. */
const mergeLayers = (input: ConfigInput, file: string | undefined, fromFile: Record<string, unknown>) => {
  const settings = new RawSettings()
  if (file !== undefined) settings.merge(fromFile, { _tag: "File", file })
  mergeEnv(settings, input.env, LEAVES)
  if (input.flags.database?.kind !== undefined) {
    for (const path of DATABASE_CHOICE) settings.delete(path)
  }
  if (isTable(input.flags)) settings.merge(input.flags, { _tag: "Flag" })

  const url = ["database", "postgres_url"]
  if (settings.get(["database", "kind"]) === undefined && settings.get(url) !== undefined) {
    settings.set(["database", "kind"], "postgres", settings.originOf(url))
  }
  if (settings.get(["cluster", "db_pool"]) === undefined) {
    settings.set(["cluster", "db_pool"], settings.get(["database", "kind"]) === "postgres" ? 8 : 4)
  }
  return settings
}

/** Rules between settings, each line naming where the offending value came from. */
const consistencyProblems = (config: AppConfig, settings: RawSettings): ReadonlyArray<string> => {
  const at = (...path: ReadonlyArray<string>) => where(settings.originOf(path), path)
  const problems: Array<string> = []
  const { database, cluster, rate_limit, quota, metering, smart, server } = config

  if (database.kind === "postgres" && database.postgres_url === undefined) {
    problems.push(
      `${at("database", "kind")}: database.kind postgres needs database.postgres_url (or SVC_POSTGRES_URL, --postgres)`
    )
  }
  if (cluster.role !== "primary" && database.kind !== "postgres") {
    problems.push(
      `${at("cluster", "role")}: expected database.kind postgres for role ${cluster.role} ` +
        `(processes share one Postgres database), got ${database.kind}`
    )
  }
  if (cluster.role === "replica" && cluster.primary_url === undefined) {
    problems.push(`${at("cluster", "role")}: a replica needs cluster.primary_url (or SVC_PRIMARY_URL, --primary-url)`)
  }

  // The buckets need a rate: a section that is on without one would limit nothing while seeming to.
  if (rate_limit.enabled && rate_limit.requests_per_second === undefined) {
    problems.push(
      `${at("rate_limit", "requests_per_second")}: a [rate_limit] section that is on needs rate_limit.requests_per_second ` +
        "(cost units per second; 0 limits only clients with an override) or enabled = false"
    )
  }
  const [dearestClass, dearest] = Object.entries(rate_limit.cost).reduce((a, b) => (b[1] > a[1] ? b : a))
  const checkBurst = (path: ReadonlyArray<string>, burst: number | undefined) => {
    if (burst !== undefined && burst < dearest) {
      problems.push(
        `${where(settings.originOf(path), path)}: expected at least the dearest cost ` +
          `(rate_limit.cost.${dearestClass} = ${dearest}), got ${showValue(burst)}`
      )
    }
  }
  checkBurst(["rate_limit", "burst"], rate_limit.burst)
  checkBurst(["rate_limit", "anonymous_burst"], rate_limit.anonymous_burst)
  for (const [client, limit] of Object.entries(rate_limit.clients)) {
    if (limit.requests_per_second !== 0) checkBurst(["rate_limit", "clients", client, "burst"], limit.burst)
  }

  // Quotas count what metering stores: without it a quota would only ever see this server's counts since its last read.
  if (quota.enabled && !metering.enabled) {
    problems.push(
      `${at("quota", "enabled")}: a [quota] section that is on needs metering (quotas count metering's totals); ` +
        "set metering.enabled = true or quota.enabled = false"
    )
  }

  const host = parseBind(server.bind)?.host ?? ""
  if (smart.enabled && server.public_url === undefined && !isLoopbackHost(host)) {
    problems.push(
      `${at("smart", "enabled")}: SMART needs server.public_url (or --public-url) ` +
        `when server.bind ${server.bind} is not a loopback address`
    )
  }
  return problems
}

export const loadAppConfig = (input: ConfigInput): Effect.Effect<LoadedConfig, ConfigError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const file = yield* findConfigFile(input)
    const fromFile = file === undefined ? {} : yield* readToml(file)
    const settings = mergeLayers(input, file, fromFile)
    const config = yield* Schema.decodeUnknown(AppConfig, { errors: "all", onExcessProperty: "error" })(
      settings.raw
    ).pipe(Effect.mapError((e) =>
      new ConfigError({ message: describeParseError(e, settings, KNOWN_SETTINGS), fromFlags: onlyFlagsAtFault(e, settings) })
    ))
    const problems = consistencyProblems(config, settings)
    if (problems.length > 0) return yield* fail(problems.join("\n"))
    const secrets = yield* readSecrets(input.env, config)
    const s3Endpoint = input.env["SVC_S3_ENDPOINT"]
    return { config, file, secrets, s3Endpoint: s3Endpoint === "" ? undefined : s3Endpoint }
  })
