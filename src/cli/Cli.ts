/**
 * The command line (spec: Command line): `svc [flags]`, `svc migrate --status | --dry-run`,
 * `svc --version`. Every flag maps onto a configuration setting; the flags win over the file and
 * the environment.
 */
import { Command, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { buildVersion } from "../version.ts"
import { UsageError } from "./errors.ts"
import { runMigrate } from "./migrate.ts"
import { runServe } from "./serve.ts"
import { type FlagSettings, setIn } from "./settings.ts"

const text = (name: string, pseudo: string, description: string) =>
  Options.text(name).pipe(Options.withPseudoName(pseudo), Options.withDescription(description), Options.optional)
const flag = (name: string, description: string) => Options.boolean(name).pipe(Options.withDescription(description))

const databaseOptions = {
  config: text("config", "path", "Configuration file (default ./svc.toml, then /etc/svc/svc.toml)"),
  sqlite: text("sqlite", "path", "SQLite database file"),
  postgres: text("postgres", "url", "Postgres connection URL")
}

const serveOptions = {
  ...databaseOptions,
  memory: flag("memory", "SQLite in memory; nothing is kept"),
  bind: text("bind", "host:port", "Listen address host:port (default 127.0.0.1:8080)"),
  package: Options.text("package").pipe(Options.withPseudoName("dir|name@version"), Options.withDescription("Implementation guide: a directory, a .tgz file or name@version"), Options.repeated),
  references: Options.choice("references", ["strict", "fhir"]).pipe(Options.withDescription("Reference policy"), Options.optional),
  smart: flag("smart", "Enable SMART App Launch 2.2"),
  publicUrl: text("public-url", "url", "Public URL of the server"),
  smartPatient: text("smart-patient", "id", "Launch patient for the demo login"),
  smartEncounter: text("smart-encounter", "id", "Launch encounter for the demo login"),
  smartFhirUser: text("smart-fhir-user", "Resource/id", "fhirUser (Resource/id) for the demo login"),
  smartDcrToken: text("smart-dcr-token", "token", "Dynamic client registration token"),
  smartConfidentialSecret: text("smart-confidential-secret", "secret", "Confidential client secret"),
  updateAsCreate: flag("update-as-create", "Let PUT create a resource under a client-named id"),
  oidcIssuer: text("oidc-issuer", "url", "OpenID Connect issuer URL"),
  oidcClientId: text("oidc-client-id", "id", "OpenID Connect client id"),
  smartDemoLogin: flag("smart-demo-login", "Demo login for testing: accepts any username"),
  exportDir: text("export-dir", "path", "Directory for $export NDJSON output"),
  terminology: Options.text("terminology").pipe(Options.withPseudoName("url"), Options.withDescription("Terminology source URL"), Options.repeated),
  traceEngine: flag("trace-engine", "Feature switch: trace engine"),
  sdcArchiver: flag("sdc-archiver", "Store QuestionnaireResponse without allowing a later read"),
  role: Options.choice("role", ["primary", "standby", "replica"]).pipe(Options.withDescription("Process role"), Options.optional),
  standby: flag("standby", "Same as --role standby"),
  primaryUrl: text("primary-url", "url", "URL of the primary (replicas send writes there)"),
  dbPool: Options.integer("db-pool").pipe(Options.withPseudoName("n"), Options.withDescription("Database connections (Postgres) or SQLite readers"), Options.optional)
}

type ServeFlags = Command.Command.ParseConfig<typeof serveOptions>

const given = <A>(option: Option.Option<A>): A | undefined => Option.getOrUndefined(option)

/** The settings the flags name, and the flags themselves (for messages about them). */
export const settingsFromFlags = (flags: ServeFlags): { readonly settings: FlagSettings; readonly named: ReadonlyArray<string> } => {
  const settings: FlagSettings = {}
  const named: Array<string> = []
  const put = (flagName: string, path: string, value: unknown) => {
    if (value === undefined || value === false || (Array.isArray(value) && value.length === 0)) return
    setIn(settings, path, value)
    named.push(flagName)
  }
  const sqlite = given(flags.sqlite)
  const postgres = given(flags.postgres)
  if (sqlite !== undefined) setIn(settings, "database", { kind: "sqlite", sqlite_path: sqlite })
  if (flags.memory) setIn(settings, "database", { kind: "memory" })
  if (postgres !== undefined) setIn(settings, "database", { kind: "postgres", postgres_url: postgres })
  put("--bind", "server.bind", given(flags.bind))
  put("--package", "conformance.packages", flags.package)
  put("--references", "conformance.reference_policy", given(flags.references))
  put("--smart", "smart.enabled", flags.smart)
  put("--public-url", "server.public_url", given(flags.publicUrl))
  put("--smart-patient", "smart.patient", given(flags.smartPatient))
  put("--smart-encounter", "smart.encounter", given(flags.smartEncounter))
  put("--smart-fhir-user", "smart.fhir_user", given(flags.smartFhirUser))
  put("--update-as-create", "conformance.update_as_create", flags.updateAsCreate)
  put("--oidc-issuer", "smart.oidc.issuer", given(flags.oidcIssuer))
  put("--oidc-client-id", "smart.oidc.client_id", given(flags.oidcClientId))
  put("--smart-demo-login", "smart.demo_login", flags.smartDemoLogin)
  put("--export-dir", "export.dir", given(flags.exportDir))
  put("--terminology", "terminology.urls", flags.terminology)
  put("--trace-engine", "features.trace_engine", flags.traceEngine)
  put("--sdc-archiver", "features.sdc_archiver", flags.sdcArchiver)
  put("--role", "cluster.role", given(flags.role))
  put("--standby", "cluster.role", flags.standby ? "standby" : undefined)
  put("--primary-url", "cluster.primary_url", given(flags.primaryUrl))
  put("--db-pool", "cluster.db_pool", given(flags.dbPool))
  // The secrets' settings are environment variables; the flags name them on the command line instead.
  if (Option.isSome(flags.smartDcrToken)) named.push("--smart-dcr-token")
  if (Option.isSome(flags.smartConfidentialSecret)) named.push("--smart-confidential-secret")
  return { settings, named }
}

const serve = Command.make("svc", serveOptions, (flags) =>
  Effect.gen(function*() {
    if (flags.standby && Option.isSome(flags.role) && flags.role.value !== "standby") {
      return yield* new UsageError({ message: `--standby contradicts --role ${flags.role.value}` })
    }
    const { named, settings } = settingsFromFlags(flags)
    yield* runServe({ configPath: given(flags.config), settings, named })
  })).pipe(Command.withDescription("A FHIR R4 server on SQLite or Postgres"))

const migrate = Command.make("migrate", {
  ...databaseOptions,
  status: flag("status", "Print the recorded migrations and those this build would apply"),
  dryRun: flag("dry-run", "As --status, with the SQL that would run")
}, (flags) =>
  Effect.gen(function*() {
    if (flags.status === flags.dryRun) {
      return yield* new UsageError({ message: "svc migrate needs exactly one of --status or --dry-run" })
    }
    const settings: FlagSettings = {}
    const sqlite = given(flags.sqlite)
    const postgres = given(flags.postgres)
    if (sqlite !== undefined) setIn(settings, "database", { kind: "sqlite", sqlite_path: sqlite })
    if (postgres !== undefined) setIn(settings, "database", { kind: "postgres", postgres_url: postgres })
    yield* runMigrate({ configPath: given(flags.config), settings, withSql: flags.dryRun })
  })).pipe(Command.withDescription("Report database migrations without changing anything"))

export const cli = Command.run(serve.pipe(Command.withSubcommands([migrate])), {
  name: "svc",
  version: buildVersion
})
