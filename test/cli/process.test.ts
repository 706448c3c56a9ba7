/** The `svc` command as a user runs it: flags, exit codes, messages, start-up and shutdown. */
import Sqlite from "better-sqlite3"
import { existsSync, writeFileSync } from "node:fs"
import { createServer as createHttpServer } from "node:http"
import { createServer } from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { runSvc, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()

const get = async (url: string) => {
  const response = await fetch(url)
  return { status: response.status, body: await response.json() as Record<string, unknown> }
}

describe("svc on the command line", () => {
  it("prints its version with --version and -V", async () => {
    const long = await runSvc(["--version"])
    const short = await runSvc(["-V"])
    expect(long.code).toBe(0)
    expect(long.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/)
    expect(short.stdout).toBe(long.stdout)
  })

  it("refuses more than one database flag with the spec's message and status 2", async () => {
    for (const args of [["--sqlite", "a.sqlite", "--memory"], ["--memory", "--memory"], ["--postgres", "postgres://x/y", "--sqlite", "b"]]) {
      const result = await runSvc(args, { cwd: scratch() })
      expect(result.code).toBe(2)
      expect(result.stderr).toContain("pass only one of --sqlite, --memory, or --postgres")
    }
  })

  it("refuses --sqlite directly followed by another flag", async () => {
    const cwd = scratch()
    const result = await runSvc(["--sqlite", "--bind", "127.0.0.1:0"], { cwd })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("--sqlite needs a value")
    expect(existsSync(join(cwd, "--bind"))).toBe(false)
  })

  it("applies the database-flag rule to svc migrate with status 2", async () => {
    const result = await runSvc(["migrate", "--status", "--sqlite", "a.sqlite", "--postgres", "postgres://x/y"], { cwd: scratch() })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("pass only one of --sqlite, --memory, or --postgres")
  })

  it("refuses an unknown flag with status 2, naming it in one line", async () => {
    const result = await runSvc(["--no-such-flag"], { cwd: scratch() })
    expect(result.code).toBe(2)
    expect(result.stderr).toBe("svc: unknown flag --no-such-flag; svc --help lists the flags\n")
    const migrate = await runSvc(["migrate", "--status", "--memory"], { cwd: scratch() })
    expect(migrate.code).toBe(2)
    expect(migrate.stderr).toBe("svc: --memory is not a flag of svc migrate\n")
  })

  it("refuses a flag without its value, or with a value it cannot take, with status 2 and the flag named", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      [["--memory", "--references"], "svc: --references needs a value (strict|fhir)\n"],
      [["--memory", "--package"], "svc: --package needs a value (dir|file.tgz|name@version)\n"],
      [["--memory", "--references", "loose"], "svc: --references: expected one of strict, fhir, got \"loose\"\n"],
      [["--memory", "--db-pool", "many"], "svc: --db-pool: expected an integer >= 1, got \"many\"\n"],
      [["--memory", "--db-pool", "0"], "svc: --db-pool: expected an integer >= 1, got 0\n"],
      [["--memory", "--bind", "nowhere"], "svc: --bind: expected host:port (like 127.0.0.1:8080 or [::1]:8080), got \"nowhere\"\n"],
      [["--memory", "extra"], "svc: unexpected argument 'extra': svc takes only flags (svc --help lists them)\n"]
    ]
    for (const [args, message] of cases) {
      const result = await runSvc(args, { cwd: scratch() })
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 2, stderr: message })
    }
  })

  it("refuses a SQLite path under a regular file in one line: status 1 to start, 2 from migrate", async () => {
    const cwd = scratch()
    writeFileSync(join(cwd, "plain"), "not a directory")
    const started = await runSvc(["--sqlite", "plain/svc.sqlite"], { cwd })
    expect(started.code).toBe(1)
    expect(started.stderr).toBe(`svc: cannot open database SQLite file plain/svc.sqlite: ${join(cwd, "plain")} is not a directory\n`)
    const deeper = await runSvc(["--sqlite", "plain/sub/svc.sqlite"], { cwd })
    expect(deeper.code).toBe(1)
    expect(deeper.stderr).toContain("a part of the path is a file")
    const status = await runSvc(["migrate", "--status", "--sqlite", "plain/svc.sqlite"], { cwd })
    expect(status.code).toBe(2)
    expect(status.stderr).toContain(`${join(cwd, "plain")} is not a directory`)
    expect(status.stdout).toBe("")
  })

  it("refuses a flag whose capability is not built yet, naming it", async () => {
    const result = await runSvc(["--memory", "--trace-engine"], { cwd: scratch() })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("--trace-engine")
    expect(result.stderr).toContain("not available in this build")
  })

  it("takes --terminology, repeated: each URL is pulled at start and shown by /healthz?verbose=1 without its password", async () => {
    const requests: Array<{ readonly path: string; readonly authorization: string | undefined }> = []
    const files: Record<string, { readonly type: string; readonly body: string }> = {
      "/terminology.json": {
        type: "application/fhir+json",
        body: JSON.stringify({ resourceType: "Bundle", type: "collection", entry: [{ resource: { resourceType: "Patient" } }, { resource: { resourceType: "CodeSystem", url: "http://example.org/cs", status: "active", content: "complete" } }] })
      },
      "/private/terminology.ndjson": { type: "application/fhir+ndjson", body: `${JSON.stringify({ resourceType: "ValueSet", url: "http://example.org/vs", status: "active" })}\n` }
    }
    const source = createHttpServer((request, response) => {
      requests.push({ path: request.url ?? "", authorization: request.headers.authorization })
      const file = files[request.url ?? ""]
      response.writeHead(file === undefined ? 404 : 200, { "content-type": file?.type ?? "text/plain" })
      response.end(file?.body ?? "not found")
    })
    await new Promise<void>((resolve) => source.listen(0, "127.0.0.1", resolve))
    const port = (source.address() as { port: number }).port
    try {
      const server = await startSvc(["--memory", "--terminology", `http://127.0.0.1:${port}/terminology.json`, "--terminology", `http://reader:s3cret@127.0.0.1:${port}/private/terminology.ndjson`], { cwd: scratch() })
      await server.logged("serving")
      const health = await get(`${server.url}/healthz?verbose=1`)
      // The fixture packages know no CodeSystem or ValueSet type: what is read is refused, and counted.
      expect(health.body["terminology"]).toEqual({
        refresh_minutes: 60,
        sources: [
          expect.objectContaining({ url: `http://127.0.0.1:${port}/terminology.json`, kind: "bundle", attempts: 1, last_error: null, last_pull: expect.objectContaining({ read: 1, created: 0, skipped: expect.objectContaining({ other_type: 1, refused: 1 }) }) }),
          expect.objectContaining({ url: `http://127.0.0.1:${port}/private/terminology.ndjson`, kind: "ndjson", attempts: 1, last_error: null, last_pull: expect.objectContaining({ read: 1, skipped: expect.objectContaining({ refused: 1 }) }) })
        ]
      })
      expect(requests.filter((r) => r.path.startsWith("/private/")).map((r) => r.authorization)).toEqual([
        `Basic ${Buffer.from("reader:s3cret").toString("base64")}`,
        `Basic ${Buffer.from("reader:s3cret").toString("base64")}`
      ])
      const finished = await server.stop("SIGTERM")
      expect(finished.code).toBe(0)
      expect(server.lines().some((line) => line.includes("terminology pull: resource refused"))).toBe(true)
      expect(finished.stdout).not.toContain("s3cret")
    } finally {
      source.close()
    }
  })

  it("does not start when a --terminology URL cannot be pulled on a first start: status 1, the URL without its password", async () => {
    const blocker = createServer()
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve))
    const port = (blocker.address() as { port: number }).port
    await new Promise<void>((resolve) => blocker.close(() => resolve()))
    const result = await runSvc(["--memory", "--terminology", `http://reader:s3cret@127.0.0.1:${port}/fhir`], { cwd: scratch() })
    expect(result.code).toBe(1)
    expect(result.stderr).toBe(
      `svc: terminology source http://127.0.0.1:${port}/fhir could not be pulled on a first start: GET http://127.0.0.1:${port}/fhir/metadata failed: connection refused\n`
    )
    expect(result.stdout).not.toContain("s3cret")
  })

  it("stops on a broken configuration file with a message naming the file and the setting", async () => {
    const cwd = scratch()
    writeFileSync(join(cwd, "svc.toml"), "[server]\ntrusted_proxy_hops = \"two\"\n")
    const result = await runSvc(["--memory"], { cwd })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("svc.toml")
    expect(result.stderr).toContain("server.trusted_proxy_hops")
    expect(result.stderr).not.toMatch(/\n\s+at /)
  })

  it("fails at start-up when the address is taken", async () => {
    const blocker = createServer()
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve))
    const port = (blocker.address() as { port: number }).port
    const result = await runSvc(["--memory", "--bind", `127.0.0.1:${port}`], { cwd: scratch() })
    blocker.close()
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("already in use")
  })
})

describe("svc on a SQLite file", () => {
  it("starts on svc.sqlite by default, serves probes, logs requests, and stops cleanly on SIGTERM", async () => {
    const cwd = scratch()
    // The TypeScript entry point, as `npm run svc` runs it; the other tests run the bundle.
    const server = await startSvc([], { cwd, typescript: true })
    await server.logged("serving")
    expect(await get(`${server.url}/livez`)).toEqual({ status: 200, body: { status: "ok" } })
    expect(await get(`${server.url}/readyz`)).toEqual({ status: 200, body: { status: "ok" } })
    expect(await get(`${server.url}/healthz`)).toEqual({ status: 200, body: { status: "ok", role: "primary" } })
    const missing = await fetch(`${server.url}/fhir/Patient/1`, { headers: { "x-request-id": "r-1" } })
    expect(missing.status).toBe(404)
    const finished = await server.stop("SIGTERM")
    expect(finished.code).toBe(0)
    expect(existsSync(join(cwd, "svc.sqlite"))).toBe(true)
    // A clean close checkpoints the write-ahead log and removes it.
    expect(existsSync(join(cwd, "svc.sqlite-wal"))).toBe(false)
    const requests = server.lines().map((line) => JSON.parse(line)).filter((entry) => entry.message === "request")
    expect(requests).toEqual([expect.objectContaining({ request_id: "r-1", path: "/fhir/Patient/1", status: 404 })])
  })

  it("leaves no file with --memory", async () => {
    const cwd = scratch()
    const server = await startSvc(["--memory"], { cwd })
    await server.logged("serving")
    expect((await get(`${server.url}/readyz`)).status).toBe(200)
    expect((await server.stop("SIGINT")).code).toBe(0)
    expect(existsSync(join(cwd, "svc.sqlite"))).toBe(false)
  })

  it("lets --sqlite override the database named by the environment", async () => {
    const cwd = scratch()
    const server = await startSvc(["--sqlite", "flag.sqlite"], { cwd, env: { SVC_POSTGRES_URL: "postgres://nobody@127.0.0.1:1/none" } })
    await server.logged("serving")
    expect((await server.stop()).code).toBe(0)
    expect(existsSync(join(cwd, "flag.sqlite"))).toBe(true)
  })

  it("refuses a file that is not a database with a clear message", async () => {
    const cwd = scratch()
    writeFileSync(join(cwd, "svc.sqlite"), Buffer.alloc(8192, 7))
    const result = await runSvc([], { cwd })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("not a database")
  })

  it("refuses a database migrated by a newer build, and migrate --status says so with status 1", async () => {
    const cwd = scratch()
    const first = await startSvc([], { cwd })
    await first.logged("serving")
    expect((await first.stop()).code).toBe(0)
    const db = new Sqlite(join(cwd, "svc.sqlite"))
    db.prepare("insert into svc_migrations (version, name, checksum, build_version, applied_at) values (9999, 'future', 'x', '99.0.0', '2100-01-01T00:00:00Z')").run()
    db.close()
    const again = await runSvc([], { cwd })
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("newer build")
    const status = await runSvc(["migrate", "--status"], { cwd })
    expect(status.code).toBe(1)
  })

  it("refuses a database pinned to another FHIR version", async () => {
    const cwd = scratch()
    const first = await startSvc([], { cwd })
    await first.logged("serving")
    await first.stop()
    const db = new Sqlite(join(cwd, "svc.sqlite"))
    db.prepare("update svc_meta set value = 'r5' where key = 'fhir_version'").run()
    db.close()
    const again = await runSvc([], { cwd })
    expect(again.code).toBe(1)
    expect(again.stderr).toContain("r5")
  })

  it("reports migrations without creating a missing file; --dry-run adds the SQL", async () => {
    const cwd = scratch()
    const status = await runSvc(["migrate", "--status", "--sqlite", "new.sqlite"], { cwd })
    expect(status.code).toBe(0)
    expect(status.stdout).toContain("0001")
    expect(existsSync(join(cwd, "new.sqlite"))).toBe(false)
    const dry = await runSvc(["migrate", "--dry-run", "--sqlite", "new.sqlite"], { cwd })
    expect(dry.code).toBe(0)
    expect(dry.stdout.toLowerCase()).toContain("create table")
    expect(existsSync(join(cwd, "new.sqlite"))).toBe(false)
  })

  it("answers 2 from migrate when the database cannot be read or the arguments are wrong", async () => {
    const cwd = scratch()
    writeFileSync(join(cwd, "bad.sqlite"), Buffer.alloc(8192, 7))
    expect((await runSvc(["migrate", "--status", "--sqlite", "bad.sqlite"], { cwd })).code).toBe(2)
    expect((await runSvc(["migrate"], { cwd })).code).toBe(2)
    expect((await runSvc(["migrate", "--status", "--postgres", "postgres://nobody@127.0.0.1:1/none"], { cwd })).code).toBe(2)
  })
})

describe("svc on Postgres", async () => {
  const { available, url } = await suiteDatabase()

  it.skipIf(!available)("starts, serves probes, reports migrations and stops cleanly", async () => {
    const cwd = scratch()
    const server = await startSvc(["--postgres", url()], { cwd })
    await server.logged("serving")
    expect(await get(`${server.url}/readyz`)).toEqual({ status: 200, body: { status: "ok" } })
    const verbose = await get(`${server.url}/healthz?verbose=1`)
    expect(verbose.body).toMatchObject({ status: "ok", role: "primary", database: { kind: "postgres" } })
    // What the process holds (docs/operations.md): resident memory, the JS heap in use, idle collections run
    // and the native heap's releases after them.
    const memory = (verbose.body as { memory: Record<string, number> }).memory
    expect(memory.rss_bytes).toBeGreaterThan(memory.heap_used_bytes!)
    expect(memory.heap_used_bytes).toBeGreaterThan(0)
    expect(memory.idle_collections).toBeGreaterThanOrEqual(0)
    expect(memory.native_releases).toBeGreaterThanOrEqual(0)
    expect((await server.stop()).code).toBe(0)
    const status = await runSvc(["migrate", "--status", "--postgres", url()], { cwd })
    expect(status.code).toBe(0)
    expect(status.stdout).toContain("0001")
  })

  it.skipIf(!available)("takes the database from SVC_POSTGRES_URL", async () => {
    const server = await startSvc([], { cwd: scratch(), env: { SVC_POSTGRES_URL: url() } })
    const serving = await server.logged("serving")
    expect(serving["database"]).toBe("postgres")
    expect((await server.stop()).code).toBe(0)
  })

  it("fails at start-up when Postgres does not answer, naming it without the password", async () => {
    const result = await runSvc(["--postgres", "postgres://someone:hunter2@127.0.0.1:1/none"], { cwd: scratch() })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("127.0.0.1:1")
    expect(result.stderr).not.toContain("hunter2")
  })
})
