import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { load, loadError, loadTomlError, tempDir } from "./support.ts"

/** What every error must look like to a user: no stack, no [object Object]. */
const readable = (message: string) => {
  expect(message).not.toContain("[object Object]")
  expect(message).not.toMatch(/\n\s+at /)
  expect(message).not.toContain("Expected {")
}

layer(NodeFileSystem.layer)("configuration errors", (it) => {
  describe("in the file, naming the file, the setting and what was expected", () => {
    const cases: ReadonlyArray<readonly [string, string, string]> = [
      ["a negative integer", `[server]\ntrusted_proxy_hops = -1\n`, "server.trusted_proxy_hops: expected an integer >= 0, got -1"],
      ["a value of the wrong type", `[server]\ntrusted_proxy_hops = "one"\n`, `server.trusted_proxy_hops: expected an integer >= 0, got "one"`],
      ["a fraction where an integer goes", `[request_log]\nretention_hours = 1.5\n`, "request_log.retention_hours: expected an integer >= 1, got 1.5"],
      ["a boolean written as text", `[conformance]\nupdate_as_create = "yes"\n`, `conformance.update_as_create: expected true or false, got "yes"`],
      ["a bind that is not host:port", `[server]\nbind = "8080"\n`, `server.bind: expected host:port (like 127.0.0.1:8080 or [::1]:8080), got "8080"`],
      ["a bind with a port out of range", `[server]\nbind = "0.0.0.0:70000"\n`, `server.bind: expected host:port`],
      ["a URL that does not parse", `[server]\npublic_url = "not a url"\n`, `server.public_url: expected an http:// or https:// URL, got "not a url"`],
      ["a Postgres URL of another scheme", `[database]\npostgres_url = "mysql://db/x"\n`, `database.postgres_url: expected a postgres:// or postgresql:// URL, got "mysql://db/x"`],
      ["an unknown role", `[cluster]\nrole = "leader"\n`, `cluster.role: expected one of primary, standby, replica, got "leader"`],
      ["an unknown reference policy", `[conformance]\nreference_policy = "loose"\n`, `conformance.reference_policy: expected one of strict, fhir, got "loose"`],
      ["an unknown database kind", `[database]\nkind = "mysql"\n`, `database.kind: expected one of sqlite, memory, postgres, got "mysql"`],
      ["an unknown log level", `[server]\nlog_level = "trace"\n`, `server.log_level: expected one of debug, info, warning, error, got "trace"`],
      ["an IPv4 CIDR that does not parse", `[server]\ntrusted_proxy_peers = ["10.0.0.0/8", "10.0.0.0/33"]\n`, `server.trusted_proxy_peers[1]: expected a CIDR network (like 10.0.0.0/8 or fd00::/8), got "10.0.0.0/33"`],
      ["an IPv6 CIDR that does not parse", `[server]\ntrusted_proxy_peers = ["fd00::/129"]\n`, `server.trusted_proxy_peers[0]: expected a CIDR network`],
      ["a list given as a string", `[server]\ntrusted_proxy_peers = "10.0.0.0/8"\n`, `server.trusted_proxy_peers: expected a list of CIDR networks, got "10.0.0.0/8"`],
      ["db_pool below 1", `[cluster]\ndb_pool = 0\n`, "cluster.db_pool: expected an integer >= 1, got 0"],
      ["a FHIR version other than r4", `[fhir]\nversion = "r5"\n`, `fhir.version: expected r4 (only r4 is available in this build), got "r5"`],
      ["a section that is not a table", `server = 5\n`, "server: expected a table, got 5"],
      ["a fhir_user that is not Resource/id", `[smart]\nfhir_user = "bob"\n`, `smart.fhir_user: expected a reference Resource/id (like Practitioner/123), got "bob"`],
      ["a per-client burst given as text", `[rate_limit.clients."my.app"]\nburst = "lots"\n`, `rate_limit.clients."my.app".burst: expected a number >= 0, got "lots"`]
    ]
    for (const [name, toml, expected] of cases) {
      it.scoped(name, () =>
        Effect.gen(function*() {
          const { file, message } = yield* loadTomlError(toml)
          expect(message).toContain(`${file}: ${expected}`)
          readable(message)
        }))
    }
  })

  it.scoped("malformed TOML names the file, line and column", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[server]\nbind = "127.0.0.1:8080"\nhops = [1,\n`)
      expect(message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:4:1: malformed TOML: `))
      readable(message)
    }))

  it.scoped("an unknown section is named, with a suggestion when one is close", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[servr]\nbind = "127.0.0.1:1"\n`)
      expect(message).toBe(`${file}: unknown section [servr] (did you mean [server]?)`)
    }))

  it.scoped("an unknown key is named with its section", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[server]\nbnd = "127.0.0.1:1"\n[audit]\nflavour = 1\n`)
      expect(message).toContain(`${file}: unknown setting server.bnd (did you mean server.bind?)`)
      expect(message).toContain(`${file}: unknown setting audit.flavour`)
    }))

  it.scoped("a secret written in the file is refused, pointing at its environment variable", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[smart.oidc]\nclient_secret = "hunter2-hunter2"\n`)
      expect(message).toBe(
        `${file}: smart.oidc.client_secret: secrets are not read from the configuration; set SVC_OIDC_CLIENT_SECRET in the environment`
      )
      expect(message).not.toContain("hunter2")
    }))

  it.scoped("several problems are reported together, one per line", () =>
    Effect.gen(function*() {
      const { message } = yield* loadTomlError(`[server]\ntrusted_proxy_hops = -1\n[cluster]\ndb_pool = 0\n`)
      expect(message.split("\n")).toHaveLength(2)
    }))

  it.scoped("a burst lower than the dearest cost is refused", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[rate_limit]\nrequests_per_second = 50\nburst = 10\n`)
      expect(message).toBe(`${file}: rate_limit.burst: expected at least the dearest cost (rate_limit.cost.export = 20), got 10`)
    }))

  it.scoped("the dearest cost follows [rate_limit.cost], and exempt clients are not checked", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(
        `[rate_limit]\nrequests_per_second = 50\nburst = 10\n[rate_limit.cost]\nexport = 8\nbundle = 12\n` +
          `[rate_limit.clients.free]\nrequests_per_second = 0\nburst = 1\n[rate_limit.clients.paid]\nburst = 2\n`
      )
      expect(message).toBe(
        `${file}: rate_limit.burst: expected at least the dearest cost (rate_limit.cost.bundle = 12), got 10\n` +
          `${file}: rate_limit.clients.paid.burst: expected at least the dearest cost (rate_limit.cost.bundle = 12), got 2`
      )
    }))

  it.scoped("a [rate_limit] that is on without requests_per_second is refused", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[rate_limit]\nburst = 100\n`)
      expect(message).toBe(
        `${file}: rate_limit.requests_per_second: a [rate_limit] section that is on needs rate_limit.requests_per_second ` +
          "(cost units per second; 0 limits only clients with an override) or enabled = false"
      )
    }))

  it.scoped("an anonymous burst lower than the dearest cost is refused", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[rate_limit]\nrequests_per_second = 50\nanonymous_burst = 4\n`)
      expect(message).toBe(`${file}: rate_limit.anonymous_burst: expected at least the dearest cost (rate_limit.cost.export = 20), got 4`)
    }))

  it.scoped("a Postgres kind with no URL is refused", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[database]\nkind = "postgres"\n`)
      expect(message).toBe(`${file}: database.kind: database.kind postgres needs database.postgres_url (or SVC_POSTGRES_URL, --postgres)`)
    }))

  it.scoped("standby and replica roles need Postgres, and a replica needs a primary URL", () =>
    Effect.gen(function*() {
      const { file, message } = yield* loadTomlError(`[cluster]\nrole = "replica"\n`)
      expect(message).toContain(`${file}: cluster.role: expected database.kind postgres for role replica`)
      expect(message).toContain(`${file}: cluster.role: a replica needs cluster.primary_url`)
    }))

  it.scoped("SMART on a non-loopback bind needs a public URL", () =>
    Effect.gen(function*() {
      const { message } = yield* loadTomlError(`[server]\nbind = "0.0.0.0:8080"\n`, { flags: { smart: { enabled: true } } })
      expect(message).toBe("--smart: SMART needs server.public_url (or --public-url) when server.bind 0.0.0.0:8080 is not a loopback address")
    }))

  describe("in the environment, naming the variable", () => {
    it.scoped("a pool size that is not an integer", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_DB_POOL: "x" } })
        expect(message).toBe(`SVC_DB_POOL: expected an integer >= 1, got "x"`)
      }))

    it.scoped("a pool size below 1", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_DB_POOL: "0" } })
        expect(message).toBe("SVC_DB_POOL: expected an integer >= 1, got 0")
      }))

    it.scoped("a boolean that is not true or false", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_AUDIT_READS: "yes" } })
        expect(message).toBe(`SVC_AUDIT_READS: expected true or false, got "yes"`)
      }))

    it.scoped("a bad role", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_ROLE: "boss" } })
        expect(message).toBe(`SVC_ROLE: expected one of primary, standby, replica, got "boss"`)
      }))

    it.scoped("a bad CIDR inside a comma-separated list", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_SERVER_TRUSTED_PROXY_PEERS: "10.0.0.0/8,nope" } })
        expect(message).toBe(`SVC_SERVER_TRUSTED_PROXY_PEERS: expected a CIDR network (like 10.0.0.0/8 or fd00::/8), got "nope"`)
      }))

    it.scoped("an audit key shorter than 16 bytes, without echoing it", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const message = yield* loadError({ cwd: dir, env: { SVC_AUDIT_KEY: "short-key" } })
        expect(message).toBe("SVC_AUDIT_KEY: expected at least 16 bytes, got 9 bytes")
      }))
  })

  it.scoped("a bad flag value names the flag", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const message = yield* loadError({ cwd: dir, flags: { server: { bind: "nowhere" } } })
      expect(message).toBe(`--bind: expected host:port (like 127.0.0.1:8080 or [::1]:8080), got "nowhere"`)
    }))

  it.scoped("an error is marked as the command line's only when every value at fault came from a flag", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const fromFlag = yield* Effect.flip(load({ cwd: dir, flags: { server: { bind: "nowhere" } } }))
      expect(fromFlag.fromFlags).toBe(true)
      const mixed = yield* Effect.flip(load({ cwd: dir, flags: { server: { bind: "nowhere" } }, env: { SVC_DB_POOL: "x" } }))
      expect(mixed.fromFlags).toBe(false)
      const fromEnv = yield* Effect.flip(load({ cwd: dir, env: { SVC_DB_POOL: "x" } }))
      expect(fromEnv.fromFlags).toBe(false)
    }))

  it.scoped("a Postgres URL in an error has its password masked", () =>
    Effect.gen(function*() {
      const { message } = yield* loadTomlError(`[database]\npostgres_url = "mysql://svc:s3cret@db/x"\n`)
      expect(message).toContain(`got "mysql://svc:***@db/x"`)
      expect(message).not.toContain("s3cret")
    }))
})
