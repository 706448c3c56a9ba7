/**
 * The flags of `svc` and `svc migrate` (spec: Command line), one table that the parser (args.ts), the
 * help (help.ts) and the mapping onto settings (Cli.ts) all read, so that they cannot disagree.
 */

export interface FlagDef {
  /** Without the leading dashes: `bind` for `--bind`. */
  readonly name: string
  /** What the value is, shown as `<host:port>`; absent for a switch, which takes no value. */
  readonly value?: string
  /** May be given more than once; each adds a value. */
  readonly repeatable?: boolean
  /** The configuration setting the flag overrides (docs/configuration.md). */
  readonly setting?: string
  /** The value is an integer: handed to the setting as a number when it reads as one. */
  readonly integer?: boolean
  readonly meaning: string
  /** The default in words; without it the help shows the setting's own default, if any. */
  readonly defaultText?: string
}

const database: ReadonlyArray<FlagDef> = [
  {
    name: "config",
    value: "path",
    meaning: "Configuration file to read.",
    defaultText: "SVC_CONFIG, else ./svc.toml, else /etc/svc/svc.toml, else none"
  },
  { name: "sqlite", value: "path", setting: "database.sqlite_path", meaning: "Store the data in this SQLite file (created when missing)." },
  {
    name: "postgres",
    value: "url",
    setting: "database.postgres_url",
    meaning: "Store the data in this Postgres database (postgres://user@host:port/db; TLS by sslmode).",
    defaultText: "SVC_POSTGRES_URL when set, else the SQLite file"
  }
]

export const serveFlags: ReadonlyArray<FlagDef> = [
  database[0]!,
  database[1]!,
  { name: "memory", setting: "database.kind", meaning: "Keep the data in memory (SQLite); nothing is written and nothing survives a restart." },
  database[2]!,
  { name: "bind", value: "host:port", setting: "server.bind", meaning: "Address to listen on; IPv6 hosts in brackets ([::1]:8080)." },
  { name: "db-pool", value: "n", integer: true, setting: "cluster.db_pool", meaning: "Most Postgres connections; on SQLite the read connections beside the one writer.", defaultText: "8 on Postgres, 4 on SQLite" },
  { name: "package", value: "dir|file.tgz|name@version", repeatable: true, setting: "conformance.packages", meaning: "Install an implementation guide as well as the release packages; repeat for more." },
  { name: "references", value: "strict|fhir", setting: "conformance.reference_policy", meaning: "strict: a reference must point at a resource this server holds; fhir: it may point elsewhere (its type is still checked)." },
  { name: "update-as-create", setting: "conformance.update_as_create", meaning: "Let PUT create a resource under a client-named id (otherwise 405)." },
  { name: "public-url", value: "url", setting: "server.public_url", meaning: "Public base URL of the server, as clients reach it through any proxy.", defaultText: "http://<bind>" },
  { name: "smart", setting: "smart.enabled", meaning: "Be a SMART App Launch 2.2 authorization server." },
  { name: "smart-patient", value: "id", setting: "smart.patient", meaning: "Launch patient of the demo login." },
  { name: "smart-encounter", value: "id", setting: "smart.encounter", meaning: "Launch encounter of the demo login." },
  { name: "smart-fhir-user", value: "Resource/id", setting: "smart.fhir_user", meaning: "fhirUser of the demo login." },
  { name: "smart-dcr-token", value: "token", meaning: "Dynamic client registration token (SVC_SMART_DCR_TOKEN keeps it off the command line).", defaultText: "generated and printed once" },
  { name: "smart-confidential-secret", value: "secret", meaning: "Confidential client secret (SVC_SMART_CONFIDENTIAL_SECRET keeps it off the command line).", defaultText: "generated and printed once" },
  { name: "oidc-issuer", value: "url", setting: "smart.oidc.issuer", meaning: "OpenID Connect provider users sign in with." },
  { name: "oidc-client-id", value: "id", setting: "smart.oidc.client_id", meaning: "Client id at the OpenID Connect provider (its secret: SVC_OIDC_CLIENT_SECRET)." },
  { name: "smart-demo-login", setting: "smart.demo_login", meaning: "For testing only: a sign-in page that accepts any username and verifies nothing." },
  { name: "export-dir", value: "path", setting: "export.dir", meaning: "Directory for the NDJSON files of $export jobs; servers that serve /export share it.", defaultText: "./export beside the SQLite file; a temporary directory with --memory or Postgres" },
  { name: "terminology", value: "url", repeatable: true, setting: "terminology.urls", meaning: "Pull the CodeSystems, ValueSets and ConceptMaps of this URL (a FHIR server's base, a Bundle or an NDJSON file) into the database, at start and every terminology.refresh_minutes; repeat for more." },
  { name: "trace-engine", setting: "features.trace_engine", meaning: "Feature switch: the trace engine." },
  { name: "sdc-archiver", setting: "features.sdc_archiver", meaning: "Store QuestionnaireResponses without allowing a later read." },
  { name: "role", value: "primary|standby|replica", setting: "cluster.role", meaning: "Role of this process on a shared Postgres database (docs/cluster.md)." },
  { name: "standby", meaning: "The same as --role standby." },
  { name: "primary-url", value: "url", setting: "cluster.primary_url", meaning: "Where a replica sends writes." }
]

export const migrateFlags: ReadonlyArray<FlagDef> = [
  { name: "status", meaning: "Print the migrations the database records and those this build would apply." },
  { name: "dry-run", meaning: "As --status, with the SQL that would run." },
  database[0]!,
  { ...database[1]!, meaning: "Report on this SQLite file." },
  { ...database[2]!, meaning: "Report on this Postgres database." }
]

/** Understood by both commands, before any other flag is looked at. */
export const helpFlags: ReadonlyArray<string> = ["--help", "-h"]
export const versionFlags: ReadonlyArray<string> = ["--version", "-V"]
