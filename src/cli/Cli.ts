/**
 * The command line (spec: Command line): `svc [flags]`, `svc migrate --status | --dry-run`,
 * `svc --version`, `--help`. The flags are read against one table (flags.ts); every flag maps onto a
 * configuration setting, and the flags win over the file and the environment.
 */
import { Console, Effect } from "effect"
import { buildVersion } from "../version.ts"
import { type Command, flagsOf, type Given, parseArgs } from "./args.ts"
import { UsageError } from "./errors.ts"
import { helpText } from "./help.ts"
import { runMigrate } from "./migrate.ts"
import { runServe } from "./serve.ts"
import { type FlagSettings, setIn } from "./settings.ts"

const textOf = (given: Given, name: string): string | undefined => {
  const values = given.get(name)
  return values === undefined || values === true ? undefined : values[values.length - 1]
}

/** An integer's text as a number; anything else is left as text for the setting's check to name. */
const integerOf = (text: string): number | string => (/^-?\d{1,15}$/.test(text) ? Number(text) : text)

/** The settings the flags name, and the flags themselves (for messages about them). */
export const settingsFromFlags = (command: Command, given: Given): { readonly settings: FlagSettings; readonly named: ReadonlyArray<string> } => {
  const settings: FlagSettings = {}
  const named: Array<string> = []
  const sqlite = textOf(given, "sqlite")
  const postgres = textOf(given, "postgres")
  if (sqlite !== undefined) setIn(settings, "database", { kind: "sqlite", sqlite_path: sqlite })
  if (given.get("memory") === true) setIn(settings, "database", { kind: "memory" })
  if (postgres !== undefined) setIn(settings, "database", { kind: "postgres", postgres_url: postgres })
  for (const flag of flagsOf(command)) {
    const values = given.get(flag.name)
    if (values === undefined) continue
    named.push(`--${flag.name}`)
    if (flag.setting === undefined || flag.setting.startsWith("database.")) continue
    const value = values === true ? true : flag.repeatable ? values : flag.integer ? integerOf(values[0]!) : values[0]!
    setIn(settings, flag.setting, value)
  }
  if (given.get("standby") === true) setIn(settings, "cluster.role", "standby")
  return { settings, named }
}

const serve = (given: Given) =>
  Effect.gen(function*() {
    const role = textOf(given, "role")
    if (given.get("standby") === true && role !== undefined && role !== "standby") {
      return yield* new UsageError({ message: `--standby contradicts --role ${role}` })
    }
    const { named, settings } = settingsFromFlags("svc", given)
    yield* runServe({
      configPath: textOf(given, "config"),
      settings,
      named,
      smartSecrets: { dcrToken: textOf(given, "smart-dcr-token"), confidentialSecret: textOf(given, "smart-confidential-secret") }
    })
  })

const migrate = (given: Given) =>
  Effect.gen(function*() {
    const status = given.get("status") === true
    const dryRun = given.get("dry-run") === true
    if (status === dryRun) return yield* new UsageError({ message: "svc migrate needs exactly one of --status or --dry-run" })
    const { settings } = settingsFromFlags("migrate", given)
    yield* runMigrate({ configPath: textOf(given, "config"), settings, withSql: dryRun })
  })

/** Runs the command line `args` (without the program name); `color` says whether help may use colour. */
export const cli = (args: ReadonlyArray<string>, color: boolean) =>
  Effect.gen(function*() {
    const parsed = parseArgs(args)
    switch (parsed.kind) {
      case "help":
        return yield* Console.log(helpText(parsed.command, color).trimEnd())
      case "version":
        return yield* Console.log(buildVersion)
      case "problem":
        return yield* new UsageError({ message: parsed.message })
      case "run":
        return parsed.command === "svc" ? yield* serve(parsed.given) : yield* migrate(parsed.given)
    }
  })
