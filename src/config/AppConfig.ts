/**
 * The settings of svc, keyed exactly as in svc.toml (snake_case sections and keys).
 * Spec: interface.md "Configuration file settings" and the Limits tables; defaults in docs/configuration.md.
 */
import { Schema } from "effect"
import {
  bind,
  bool,
  cidr,
  fhirReference,
  httpUrl,
  int,
  leaf,
  listOf,
  nonNegative,
  oneOf,
  postgresUrl,
  text
} from "./Setting.ts"

const opt = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(schema, { exact: true })

const def = <A, I>(schema: Schema.Schema<A, I>, value: A) =>
  Schema.optionalWith(schema, { exact: true, default: () => value })

/** A section left out of the file decodes as if it were written empty, so its defaults apply. */
const section = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(schema, { exact: true, default: () => Schema.decodeUnknownSync(schema)({}) })

const strings = listOf(text, "a list of strings")

export const LogLevel = oneOf("debug", "info", "warning", "error")
export const DatabaseKind = oneOf("sqlite", "memory", "postgres")
export const ClusterRole = oneOf("primary", "standby", "replica")
export const ReferencePolicy = oneOf("strict", "fhir")
export const VitalSigns = oneOf("error", "warning")

export const FhirSection = Schema.Struct({
  version: def(leaf(Schema.Literal("r4"), "r4 (only r4 is available in this build)", "string"), "r4")
})

export const ServerSection = Schema.Struct({
  bind: def(bind, "127.0.0.1:8080"),
  public_url: opt(httpUrl),
  trusted_proxy_hops: def(int(0), 0),
  trusted_proxy_peers: def(listOf(cidr, "a list of CIDR networks"), []),
  max_body_bytes: def(int(1), 16_777_216),
  max_page_bytes: def(int(1), 4_194_304),
  max_bundle_entries: def(int(1), 10_000),
  max_index_rows: def(int(1), 50_000),
  max_patch_operations: def(int(1), 1_000),
  log_level: def(LogLevel, "info")
})

export const DatabaseSection = Schema.Struct({
  kind: def(DatabaseKind, "sqlite"),
  sqlite_path: def(text, "svc.sqlite"),
  postgres_url: opt(postgresUrl),
  // The most one statement may run, in milliseconds (Postgres `statement_timeout`); 0 sets none.
  statement_timeout_ms: def(int(0), 30_000)
})

export const ClusterSection = Schema.Struct({
  role: def(ClusterRole, "primary"),
  primary_url: opt(httpUrl),
  // loadAppConfig fills 8 for postgres before decoding; 4 is the SQLite and memory default.
  db_pool: def(int(1), 4),
  // The writer lease's length on Postgres (docs/cluster.md): renewed five times within it.
  lease_seconds: def(int(2), 10)
})

export const ConformanceSection = Schema.Struct({
  reference_policy: def(ReferencePolicy, "strict"),
  update_as_create: def(bool, false),
  package_registry: opt(text),
  package_cache: opt(text),
  packages: def(strings, [])
})

export const ValidationSection = Schema.Struct({
  // Extension urls starting with one of these are accepted without their definition (docs/validation.md).
  allowed_extension_domains: def(strings, []),
  // The reference validator's examples mode: URLs on the example domains accepted (docs/validation.md).
  allow_example_urls: def(bool, false),
  // What the vital signs profiles R4 implies by an Observation's code find: errors, or warnings (docs/validation.md).
  vital_signs: def(VitalSigns, "error")
})

export const FhirUserLookup = Schema.Struct({
  resource_type: def(text, "Practitioner"),
  claim: def(text, "sub"),
  system: opt(text)
})

export const OidcSection = Schema.Struct({
  issuer: opt(httpUrl),
  client_id: opt(text),
  scopes: def(strings, ["openid", "profile"]),
  fhir_user_claim: def(text, "fhirUser"),
  allowed_claims: opt(Schema.Record({ key: Schema.String, value: strings })),
  allowed_email_domains: opt(strings),
  patient_from_fhir_user: def(bool, false),
  fhir_user_lookup: opt(FhirUserLookup)
})

export const SmartSection = Schema.Struct({
  enabled: def(bool, false),
  patient: opt(text),
  encounter: opt(text),
  fhir_user: opt(fhirReference),
  demo_login: def(bool, false),
  oidc: section(OidcSection)
})

export const ExportSection = Schema.Struct({
  dir: opt(text),
  // A type's output is split into NDJSON files of at most this many bytes (docs/export.md).
  max_file_bytes: def(int(1024), 268_435_456)
})

export const TerminologySection = Schema.Struct({
  urls: def(listOf(httpUrl, "a list of http(s) URLs"), []),
  // Minutes between two pulls of a URL (docs/terminology-pull.md); sooner after a failure.
  refresh_minutes: def(int(1), 60)
})

export const FeaturesSection = Schema.Struct({
  trace_engine: def(bool, false),
  sdc_archiver: def(bool, false)
})

export const MeteringSection = Schema.Struct({
  enabled: def(bool, true)
})

export const RequestLogSection = Schema.Struct({
  enabled: def(bool, true),
  store: def(bool, true),
  retention_hours: def(int(1), 24),
  refused_per_second: def(int(0), 20)
})

export const AuditSection = Schema.Struct({
  enabled: def(bool, true),
  reads: def(bool, true),
  include_query: def(bool, true),
  retention_days: opt(int(1)),
  unattributed_per_second: def(int(0), 20)
})

export const RequestCost = Schema.Struct({
  read: def(nonNegative, 1),
  search: def(nonNegative, 2),
  write: def(nonNegative, 2),
  bundle: def(nonNegative, 5),
  operation: def(nonNegative, 5),
  export: def(nonNegative, 20),
  sync: def(nonNegative, 5)
})

export const ClientRateLimit = Schema.Struct({
  requests_per_second: opt(nonNegative),
  burst: opt(nonNegative)
})

const rateLimitFields = {
  requests_per_second: opt(nonNegative),
  burst: opt(nonNegative),
  auth_failures_per_minute: opt(int(0)),
  max_sync_connections: opt(int(0)),
  max_live_queries: opt(int(0)),
  servers: opt(int(1)),
  anonymous_requests_per_second: opt(nonNegative),
  anonymous_burst: opt(nonNegative),
  cost: section(RequestCost),
  clients: def(Schema.Record({ key: Schema.String, value: ClientRateLimit }), {})
}

/** A `[rate_limit]` section that is written is on unless it says `enabled = false`. */
export const RateLimitSection = Schema.Struct({ enabled: def(bool, true), ...rateLimitFields })

export const QuotaTotals = Schema.Struct({
  requests_per_day: opt(int(0)),
  writes_per_day: opt(int(0)),
  bytes_per_day: opt(int(0)),
  requests_per_month: opt(int(0)),
  writes_per_month: opt(int(0)),
  bytes_per_month: opt(int(0))
})

/** A `[quota]` section that is written is on unless it says `enabled = false`. */
export const QuotaSection = Schema.Struct({
  enabled: def(bool, true),
  ...QuotaTotals.fields,
  refresh_seconds: def(int(1), 30),
  clients: def(Schema.Record({ key: Schema.String, value: QuotaTotals }), {})
})

/** An absent `[rate_limit]` or `[quota]` decodes as a switched-off one. */
const switchedOff = <A, I>(schema: Schema.Schema<A, I>) =>
  Schema.optionalWith(schema, {
    exact: true,
    default: () => Schema.decodeUnknownSync(schema)({ enabled: false })
  })

export const AppConfig = Schema.Struct({
  fhir: section(FhirSection),
  server: section(ServerSection),
  database: section(DatabaseSection),
  cluster: section(ClusterSection),
  conformance: section(ConformanceSection),
  validation: section(ValidationSection),
  smart: section(SmartSection),
  export: section(ExportSection),
  terminology: section(TerminologySection),
  features: section(FeaturesSection),
  metering: section(MeteringSection),
  request_log: section(RequestLogSection),
  audit: section(AuditSection),
  rate_limit: switchedOff(RateLimitSection),
  quota: switchedOff(QuotaSection)
})

export type AppConfig = typeof AppConfig.Type
export type AppConfigEncoded = typeof AppConfig.Encoded
export type DatabaseKind = typeof DatabaseKind.Type
export type ClusterRole = typeof ClusterRole.Type
export type LogLevel = typeof LogLevel.Type

type DeepPartial<T> = T extends ReadonlyArray<unknown> ? T
  : T extends object ? { readonly [K in keyof T]?: DeepPartial<T[K]> | undefined }
  : T

/** Settings named on the command line, already typed; `undefined` means the flag was not given. */
export type FlagSettings = DeepPartial<AppConfigEncoded>
