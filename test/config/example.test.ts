import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { envName } from "../../src/config/merge.ts"
import { leavesOf } from "../../src/config/Setting.ts"
import { load, loadToml, tempDir } from "./support.ts"

const projectFile = (name: string) => fileURLToPath(new URL(`../../${name}`, import.meta.url))
const leafNames = leavesOf(AppConfig.ast).map((leaf) => leaf.path.join("."))

/** `section.key` for every setting line of a TOML text, commented out or not. */
const settingsWritten = (toml: string): Set<string> => {
  const found = new Set<string>()
  let section = ""
  for (const line of toml.split("\n")) {
    const header = /^#?\s*\[([^\]]+)\]\s*$/.exec(line)
    if (header?.[1] !== undefined) section = header[1]
    const setting = /^#?\s*([a-z_]+)\s*=/.exec(line)
    if (setting?.[1] !== undefined) found.add(`${section}.${setting[1]}`)
  }
  return found
}

/** Every row of the spec's "Configuration file settings" table and its Limits tables, with example values. */
const SPEC_ROWS = `
[fhir]
version = "r4"
[server]
bind = "0.0.0.0:8080"
public_url = "https://fhir.example.org"
trusted_proxy_hops = 1
trusted_proxy_peers = ["10.0.0.0/8", "2001:db8::/32"]
[database]
kind = "sqlite"
sqlite_path = "data/svc.sqlite"
postgres_url = "postgres://svc@db.example.org/svc"
[cluster]
role = "primary"
primary_url = "http://primary.example.org:8080"
db_pool = 8
[conformance]
reference_policy = "strict"
update_as_create = false
package_registry = "s3://bucket/prefix"
package_cache = "cache/packages"
packages = ["hl7.fhir.us.core@6.1.0", "./ig"]
[smart]
enabled = true
patient = "p1"
encounter = "e1"
fhir_user = "Practitioner/123"
demo_login = true
[smart.oidc]
issuer = "https://login.example.org"
client_id = "svc"
scopes = ["openid", "profile"]
fhir_user_claim = "fhirUser"
allowed_claims = { groups = ["clinicians"] }
allowed_email_domains = ["example.org"]
patient_from_fhir_user = true
[smart.oidc.fhir_user_lookup]
resource_type = "Practitioner"
claim = "sub"
system = "https://login.example.org/users"
[export]
dir = "export"
[terminology]
urls = []
[features]
trace_engine = false
sdc_archiver = false
[metering]
enabled = true
[request_log]
enabled = true
store = true
retention_hours = 24
refused_per_second = 20
[audit]
enabled = true
reads = true
include_query = true
retention_days = 2190
unattributed_per_second = 20
[rate_limit]
enabled = false
requests_per_second = 50
burst = 100
auth_failures_per_minute = 20
max_sync_connections = 10
max_live_queries = 100
servers = 3
anonymous_requests_per_second = 5
anonymous_burst = 20
[rate_limit.cost]
read = 1
search = 2
write = 2
bundle = 5
operation = 5
export = 20
sync = 5
[rate_limit.clients.my-app]
requests_per_second = 0
burst = 100
[quota]
enabled = false
requests_per_day = 1000
writes_per_day = 100
bytes_per_day = 1000000
requests_per_month = 30000
writes_per_month = 3000
bytes_per_month = 30000000
refresh_seconds = 30
[quota.clients.my-app]
requests_per_day = 0
`

layer(NodeFileSystem.layer)("svc.toml.example and the spec's settings", (it) => {
  it.scoped("svc.toml.example loads without error", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const loaded = yield* load({ cwd: dir, configPath: projectFile("svc.toml.example") })
      expect(loaded.config.server.bind).toBe("127.0.0.1:8080")
      expect(loaded.config.rate_limit.enabled).toBe(false)
    }))

  it.scoped("every row of the spec's settings tables is accepted with its example value", () =>
    Effect.gen(function*() {
      const { config } = yield* loadToml(SPEC_ROWS)
      expect(config.server.trusted_proxy_peers).toEqual(["10.0.0.0/8", "2001:db8::/32"])
      expect(config.smart.oidc.allowed_claims).toEqual({ groups: ["clinicians"] })
      expect(config.smart.oidc.fhir_user_lookup).toEqual({
        resource_type: "Practitioner",
        claim: "sub",
        system: "https://login.example.org/users"
      })
      expect(config.rate_limit.clients["my-app"]).toEqual({ requests_per_second: 0, burst: 100 })
      expect(config.quota).toMatchObject({ enabled: false, bytes_per_month: 30000000 })
      expect(config.audit.retention_days).toBe(2190)
    }))
})

describe("documentation", () => {
  it("svc.toml.example shows every setting", () => {
    const written = settingsWritten(readFileSync(projectFile("svc.toml.example"), "utf8"))
    expect(leafNames.filter((name) => !written.has(name))).toEqual([])
  })

  it("the spec rows above name every setting but those the architecture, docs/rest.md, docs/search.md, docs/database.md, docs/validation.md, docs/cluster.md, docs/export.md and docs/terminology-pull.md add", () => {
    const written = settingsWritten(SPEC_ROWS)
    expect(leafNames.filter((name) => !written.has(name))).toEqual([
      "server.max_body_bytes", "server.max_page_bytes", "server.max_bundle_entries", "server.max_index_rows", "server.max_patch_operations",
      "server.log_level", "database.statement_timeout_ms", "cluster.lease_seconds", "validation.allowed_extension_domains", "validation.allow_example_urls", "validation.vital_signs",
      "export.max_file_bytes", "terminology.refresh_minutes"
    ])
  })

  it("docs/configuration.md describes every setting and its environment variable", () => {
    const docs = readFileSync(projectFile("docs/configuration.md"), "utf8")
    expect(leafNames.filter((name) => !docs.includes(`\`${name}\``))).toEqual([])
    expect(leavesOf(AppConfig.ast).map((leaf) => envName(leaf.path)).filter((v) => !docs.includes(v))).toEqual([])
  })

  it("no two settings share an environment variable", () => {
    const names = leavesOf(AppConfig.ast).map((leaf) => envName(leaf.path))
    expect(new Set(names).size).toBe(names.length)
  })
})
