import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { load, loadError, loadToml, tempDir, write } from "./support.ts"

layer(NodeFileSystem.layer)("loadAppConfig", (it) => {
  describe("defaults", () => {
    it.scoped("with no file, no environment and no flags every setting takes its default", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const { config, file } = yield* load({ cwd: dir })
        expect(file).toBeUndefined()
        expect(config.fhir.version).toBe("r4")
        expect(config.server).toEqual({
          bind: "127.0.0.1:8080",
          trusted_proxy_hops: 0,
          trusted_proxy_peers: [],
          max_body_bytes: 16777216,
          max_page_bytes: 4194304,
          max_bundle_entries: 10000,
          max_index_rows: 50000,
          max_patch_operations: 1000,
          log_level: "info"
        })
        expect(config.database).toEqual({ kind: "sqlite", sqlite_path: "svc.sqlite", statement_timeout_ms: 30000 })
        expect(config.cluster).toEqual({ role: "primary", db_pool: 4, lease_seconds: 10 })
        expect(config.conformance.reference_policy).toBe("strict")
        expect(config.conformance.update_as_create).toBe(false)
        expect(config.smart.enabled).toBe(false)
        expect(config.smart.demo_login).toBe(false)
        expect(config.metering.enabled).toBe(true)
        expect(config.request_log).toEqual({ enabled: true, store: true, retention_hours: 24, refused_per_second: 20 })
        expect(config.audit).toEqual({ enabled: true, reads: true, include_query: true, unattributed_per_second: 20 })
        expect(config.audit.retention_days).toBeUndefined()
        expect(config.rate_limit.enabled).toBe(false)
        expect(config.quota.enabled).toBe(false)
      }))
  })

  describe("precedence: defaults < file < environment < flags", () => {
    it.scoped("the file overrides a default", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[server]\nbind = "0.0.0.0:9000"\n`)
        expect(config.server.bind).toBe("0.0.0.0:9000")
      }))

    it.scoped("the environment overrides the file", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[server]\nbind = "0.0.0.0:9000"\n`, {
          env: { SVC_SERVER_BIND: "0.0.0.0:9100" }
        })
        expect(config.server.bind).toBe("0.0.0.0:9100")
      }))

    it.scoped("flags override the environment and the file", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[server]\nbind = "0.0.0.0:9000"\n`, {
          env: { SVC_SERVER_BIND: "0.0.0.0:9100" },
          flags: { server: { bind: "127.0.0.1:9200" } }
        })
        expect(config.server.bind).toBe("127.0.0.1:9200")
      }))

    it.scoped("a flag left undefined does not hide the layers below it", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[server]\nbind = "0.0.0.0:9000"\n`, {
          flags: { server: { bind: undefined, public_url: undefined } }
        })
        expect(config.server.bind).toBe("0.0.0.0:9000")
      }))

    it.scoped("settings of one section merge across layers", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[request_log]\nretention_hours = 48\nstore = false\n`, {
          env: { SVC_REQUEST_LOG_RETENTION_HOURS: "72" }
        })
        expect(config.request_log).toEqual({ enabled: true, store: false, retention_hours: 72, refused_per_second: 20 })
      }))
  })

  describe("file lookup: --config > SVC_CONFIG > ./svc.toml > /etc/svc/svc.toml", () => {
    const setUp = Effect.gen(function*() {
      const dir = yield* tempDir
      const files = {
        flag: yield* write(dir, "flag.toml", `[server]\nbind = "127.0.0.1:1001"\n`),
        env: yield* write(dir, "env.toml", `[server]\nbind = "127.0.0.1:1002"\n`),
        local: yield* write(dir, "svc.toml", `[server]\nbind = "127.0.0.1:1003"\n`),
        etc: yield* write(dir, "etc/svc.toml", `[server]\nbind = "127.0.0.1:1004"\n`)
      }
      return { dir, files }
    })

    it.scoped("--config wins over every other place", () =>
      Effect.gen(function*() {
        const { dir, files } = yield* setUp
        const loaded = yield* load({ cwd: dir, configPath: "flag.toml", env: { SVC_CONFIG: files.env }, etcPath: files.etc })
        expect(loaded.file).toBe(files.flag)
        expect(loaded.config.server.bind).toBe("127.0.0.1:1001")
      }))

    it.scoped("SVC_CONFIG comes next", () =>
      Effect.gen(function*() {
        const { dir, files } = yield* setUp
        const loaded = yield* load({ cwd: dir, env: { SVC_CONFIG: files.env }, etcPath: files.etc })
        expect(loaded.file).toBe(files.env)
        expect(loaded.config.server.bind).toBe("127.0.0.1:1002")
      }))

    it.scoped("then ./svc.toml in the working directory", () =>
      Effect.gen(function*() {
        const { dir, files } = yield* setUp
        const loaded = yield* load({ cwd: dir, etcPath: files.etc })
        expect(loaded.file).toBe(files.local)
        expect(loaded.config.server.bind).toBe("127.0.0.1:1003")
      }))

    it.scoped("then the etc path", () =>
      Effect.gen(function*() {
        const { files } = yield* setUp
        const elsewhere = yield* tempDir
        const loaded = yield* load({ cwd: elsewhere, etcPath: files.etc })
        expect(loaded.file).toBe(files.etc)
        expect(loaded.config.server.bind).toBe("127.0.0.1:1004")
      }))

    it.scoped("a --config file that does not exist is an error naming it, even when ./svc.toml exists", () =>
      Effect.gen(function*() {
        const { dir } = yield* setUp
        const message = yield* loadError({ cwd: dir, configPath: "missing.toml" })
        expect(message).toBe("--config missing.toml: the configuration file does not exist")
      }))

    it.scoped("an SVC_CONFIG file that does not exist is an error naming it", () =>
      Effect.gen(function*() {
        const { dir } = yield* setUp
        const message = yield* loadError({ cwd: dir, env: { SVC_CONFIG: "gone.toml" } })
        expect(message).toBe("SVC_CONFIG gone.toml: the configuration file does not exist")
      }))

    it.scoped("a --config that names a directory is an error saying so", () =>
      Effect.gen(function*() {
        const { dir } = yield* setUp
        const message = yield* loadError({ cwd: dir, configPath: "." })
        expect(message).toBe("--config .: is a directory, not a configuration file")
      }))
  })

  describe("environment variables", () => {
    it.scoped("named variables set the database and cluster settings, coerced by type", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const { config } = yield* load({
          cwd: dir,
          env: {
            SVC_POSTGRES_URL: "postgres://svc@db.example.org/svc",
            SVC_ROLE: "replica",
            SVC_PRIMARY_URL: "http://primary.example.org:8080",
            SVC_DB_POOL: "12"
          }
        })
        expect(config.database.kind).toBe("postgres")
        expect(config.database.postgres_url).toBe("postgres://svc@db.example.org/svc")
        expect(config.cluster).toEqual({ role: "replica", primary_url: "http://primary.example.org:8080", db_pool: 12, lease_seconds: 10 })
      }))

    it.scoped("generic SVC_<SECTION>_<SETTING> variables reach every leaf: integers, booleans and lists", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const { config } = yield* load({
          cwd: dir,
          env: {
            SVC_SERVER_TRUSTED_PROXY_HOPS: "2",
            SVC_SERVER_TRUSTED_PROXY_PEERS: "10.0.0.0/8, fd00::/8",
            SVC_FEATURES_TRACE_ENGINE: "true",
            SVC_AUDIT_READS: "false",
            SVC_SMART_OIDC_SCOPES: "openid,profile,email",
            SVC_SMART_OIDC_FHIR_USER_LOOKUP_CLAIM: "email",
            SVC_SERVER_LOG_LEVEL: "debug",
            SVC_QUOTA_REQUESTS_PER_DAY: "1000"
          }
        })
        expect(config.server.trusted_proxy_hops).toBe(2)
        expect(config.server.trusted_proxy_peers).toEqual(["10.0.0.0/8", "fd00::/8"])
        expect(config.features.trace_engine).toBe(true)
        expect(config.audit.reads).toBe(false)
        expect(config.smart.oidc.scopes).toEqual(["openid", "profile", "email"])
        expect(config.smart.oidc.fhir_user_lookup?.claim).toBe("email")
        expect(config.server.log_level).toBe("debug")
        expect(config.quota).toMatchObject({ enabled: true, requests_per_day: 1000 })
      }))

    it.scoped("unknown SVC_* variables and empty values are ignored", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const { config } = yield* load({ cwd: dir, env: { SVC_NO_SUCH_THING: "x", SVC_SERVER: "y", SVC_SERVER_BIND: "" } })
        expect(config.server.bind).toBe("127.0.0.1:8080")
      }))

    it.scoped("a named variable wins over its generic spelling", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const { config } = yield* load({ cwd: dir, env: { SVC_CLUSTER_DB_POOL: "3", SVC_DB_POOL: "5" } })
        expect(config.cluster.db_pool).toBe(5)
      }))

    it.scoped("SVC_S3_ENDPOINT is passed through in the clear", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const loaded = yield* load({ cwd: dir, env: { SVC_S3_ENDPOINT: "http://minio.example.org:9000" } })
        expect(loaded.s3Endpoint).toBe("http://minio.example.org:9000")
      }))
  })

  describe("database choice", () => {
    it.scoped("a postgres_url in the file with no kind means postgres, with a pool of 8", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[database]\npostgres_url = "postgres://svc@db/svc"\n`)
        expect(config.database.kind).toBe("postgres")
        expect(config.cluster.db_pool).toBe(8)
      }))

    it.scoped("an explicit kind is kept even when a postgres_url is around", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[database]\nkind = "sqlite"\n`, {
          env: { SVC_POSTGRES_URL: "postgres://svc@db/svc" }
        })
        expect(config.database.kind).toBe("sqlite")
        expect(config.cluster.db_pool).toBe(4)
      }))

    it.scoped("an explicit db_pool is kept on postgres", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[database]\npostgres_url = "postgres://svc@db/svc"\n[cluster]\ndb_pool = 2\n`)
        expect(config.cluster.db_pool).toBe(2)
      }))

    it.scoped("a database named by flags replaces the kind, path and URL of the file", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[database]\nkind = "postgres"\npostgres_url = "postgres://svc@db/svc"\n`, {
          flags: { database: { kind: "sqlite", sqlite_path: "x.sqlite" } }
        })
        expect(config.database).toEqual({ kind: "sqlite", sqlite_path: "x.sqlite", statement_timeout_ms: 30000 })
        expect(config.cluster.db_pool).toBe(4)
      }))

    it.scoped("--memory replaces a Postgres URL from the environment and a path from the file", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[database]\nsqlite_path = "other.sqlite"\n`, {
          env: { SVC_POSTGRES_URL: "postgres://svc@db/svc" },
          flags: { database: { kind: "memory" } }
        })
        expect(config.database).toEqual({ kind: "memory", sqlite_path: "svc.sqlite", statement_timeout_ms: 30000 })
      }))
  })

  describe("[rate_limit] and [quota] are on when present", () => {
    it.scoped("an absent [rate_limit] is off", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(``)
        expect(config.rate_limit.enabled).toBe(false)
        expect(config.rate_limit.cost.export).toBe(20)
      }))

    it.scoped("a present [rate_limit] is on without saying enabled", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[rate_limit]\nrequests_per_second = 50\nburst = 100\n`)
        expect(config.rate_limit).toMatchObject({ enabled: true, requests_per_second: 50, burst: 100 })
      }))

    it.scoped("a [rate_limit] that says enabled = false is off", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[rate_limit]\nenabled = false\nrequests_per_second = 50\n`)
        expect(config.rate_limit.enabled).toBe(false)
      }))

    it.scoped("only a [rate_limit.clients.x] table also counts as present", () =>
      Effect.gen(function*() {
        const { config } = yield* loadToml(`[rate_limit.clients.batch-job]\nrequests_per_second = 0\n[rate_limit]\nrequests_per_second = 0\n`)
        expect(config.rate_limit.enabled).toBe(true)
        expect(config.rate_limit.clients["batch-job"]).toEqual({ requests_per_second: 0 })
      }))

    it.scoped("[quota] follows the same rule, with per-client totals", () =>
      Effect.gen(function*() {
        const on = yield* loadToml(`[quota]\nwrites_per_day = 10\n[quota.clients.app]\nwrites_per_day = 0\n`)
        expect(on.config.quota).toMatchObject({ enabled: true, writes_per_day: 10, refresh_seconds: 30 })
        expect(on.config.quota.clients["app"]).toEqual({ writes_per_day: 0 })
        const off = yield* loadToml(`[quota]\nenabled = false\n`)
        expect(off.config.quota.enabled).toBe(false)
      }))
  })

  it.scoped("a relative --config is read from the working directory", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      yield* write(dir, "conf/app.toml", `[cluster]\ndb_pool = 6\n`)
      const loaded = yield* load({ cwd: dir, configPath: "conf/app.toml" })
      expect(loaded.file).toBe(Path.join(dir, "conf", "app.toml"))
      expect(loaded.config.cluster.db_pool).toBe(6)
    }))
})
