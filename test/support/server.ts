/**
 * The real server in the test process: configuration as a user would write it, the real HTTP server
 * on an ephemeral loopback port, the packages from the fixture mirror. Talk to it with `fetch`.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer, type Scope } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { request as httpRequest } from "node:http"
import { fileURLToPath } from "node:url"
import type { AppInput } from "../../src/app/AppLayer.ts"
import { start } from "../../src/app/Start.ts"
import type { FlagSettings } from "../../src/config/AppConfig.ts"
import { loadAppConfig } from "../../src/config/load.ts"
import { layer as readinessLayer } from "../../src/http/Readiness.ts"
import { servingAppLayer } from "../../src/http/Server.ts"
import * as Log from "../../src/logging/Log.ts"
import type { DatabaseOptions } from "../../src/db/Database.ts"
import type { ChangeFeed } from "../../src/db/ChangeFeed.ts"
import type { LiveQueries } from "../../src/sync/LiveQueries.ts"
import type { SubscriptionSockets } from "../../src/subscriptions/SubscriptionSockets.ts"
import { type BackendKind, freshDatabase } from "./backends.ts"
import { templateFor } from "./r4Template.ts"

const fixtureMirror = fileURLToPath(new URL("../fixtures/packages/mirror", import.meta.url))
const packageCache = mkdtempSync(join(tmpdir(), "svc-test-cache-"))

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** `<url>/fhir` */
  readonly base: string
  /** Log lines written so far. */
  readonly lines: ReadonlyArray<string>
  /** Waits until every change committed so far has reached the catalog and the search index. */
  readonly searchIndexed: Effect.Effect<void>
  /** The server's change feed. */
  readonly changeFeed: ChangeFeed["Type"]
  /** The server's sockets bound to Subscriptions at `/ws` (what delivery pings). */
  readonly subscriptionSockets: SubscriptionSockets["Type"]
  /** Waits until every commit so far has been matched against the Subscriptions (their notifications queued). */
  readonly subscriptionsSettled: Effect.Effect<void>
  /** The live-query engine of `/sync`. */
  readonly liveQueries: LiveQueries["Type"]
}

/** Starts a server on a fresh database of `kind`; it stops when the scope closes. */
export const startServer = <O extends AppInput = never>(
  kind: BackendKind,
  settings: FlagSettings = {},
  inputs?: Layer.Layer<O>
): Effect.Effect<TestServer, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    // With the real R4 packages, a copy of the database globalSetup installed them in (r4Template.ts).
    const template = yield* Effect.promise(() => templateFor(kind, settings.conformance?.package_cache))
    return yield* startServerOn(yield* freshDatabase(kind, 2, template), settings, inputs)
  })

/** The extension domains the test servers allow unless a test sets its own. */
export const testExtensionDomains: ReadonlyArray<string> = ["http://example.org/", "https://example.org/", "http://example.com/", "https://example.com/"]

/**
 * Starts a server on the database `database` (not dropped when the scope closes); it stops when the scope closes.
 * `inputs` take the place of the start-up graph's own (src/app/AppLayer.ts): a writer lease, a settings section.
 */
export const startServerOn = <O extends AppInput = never>(
  database: DatabaseOptions,
  settings: FlagSettings = {},
  inputs?: Layer.Layer<O>
): Effect.Effect<TestServer, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const kind = database.kind
    const loaded = yield* loadAppConfig({
      flags: {
        ...settings,
        server: { bind: "127.0.0.1:0", ...settings.server },
        database: {
          ...settings.database,
          kind,
          ...(database.sqlitePath ? { sqlite_path: database.sqlitePath } : {}),
          ...(database.postgresUrl ? { postgres_url: database.postgresUrl } : {})
        },
        conformance: { package_registry: fixtureMirror, package_cache: packageCache, ...settings.conformance },
        // Tests write extensions and canonical urls on the example domains, and vital signs Observations with
        // only what a test needs, as a user does who allows them; a test that sets its own validation settings
        // (test/validation/http.test.ts) sees the default refusals.
        validation: settings.validation ?? { allowed_extension_domains: testExtensionDomains, allow_example_urls: true, vital_signs: "warning" }
      },
      env: {},
      cwd: process.cwd(),
      etcPath: join(packageCache, "no-such-svc.toml")
    }).pipe(Effect.provide(NodeFileSystem.layer))
    const lines: Array<string> = []
    const runtime = Layer.mergeAll(Log.layer("warning"), readinessLayer, servingAppLayer).pipe(Layer.provideMerge(Log.memorySink(lines)))
    const context = yield* Layer.build(runtime)
    const { address, searchIndexed, changeFeed, subscriptionSockets, subscriptionsSettled, liveQueries } = yield* start(loaded.config, inputs).pipe(Effect.provide(context))
    const port = address._tag === "TcpAddress" ? address.port : 0
    const url = `http://127.0.0.1:${port}`
    return { url, base: `${url}/fhir`, lines, searchIndexed, changeFeed, subscriptionSockets, subscriptionsSettled, liveQueries }
  })

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  readonly json: any
}

/** One HTTP request with fetch; the body is JSON-encoded unless it is a string. */
export const call = (
  method: string,
  url: string,
  options: { readonly body?: unknown; readonly headers?: Record<string, string>; readonly redirect?: "follow" | "manual" } = {}
): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const body = options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body)
    const response = await fetch(url, {
      method,
      redirect: options.redirect ?? "follow",
      headers: { ...(body !== undefined ? { "content-type": "application/fhir+json" } : {}), ...options.headers },
      ...(body !== undefined ? { body } : {})
    }).catch((error: unknown) => {
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : ""
      throw new Error(`${method} ${url} failed${cause}`)
    })
    const text = await response.text()
    let json: unknown
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

/** An answer as node:http gives it: the header names and values in the order sent, and the body's bytes. */
export interface RawReply {
  readonly status: number
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly bytes: Buffer
}

/** One request with node:http, keeping the raw header order and the body's bytes (fetch merges and reorders headers). */
export const rawCall = (method: string, url: string, headers: Record<string, string> = {}, body?: string): Effect.Effect<RawReply> =>
  Effect.async<RawReply>((resume) => {
    // Node's URL parsing drops an empty query (`...?`), which a test may send on purpose: the path is given as written.
    const parsed = new URL(url)
    const path = `${parsed.pathname}${parsed.search}${url.endsWith("?") && parsed.search === "" ? "?" : ""}`
    const req = httpRequest({ protocol: parsed.protocol, hostname: parsed.hostname, port: parsed.port, path, method, headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const pairs: Array<readonly [string, string]> = []
        for (let i = 0; i < res.rawHeaders.length; i += 2) pairs.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!])
        resume(Effect.succeed({ status: res.statusCode ?? 0, headers: pairs, bytes: Buffer.concat(chunks) }))
      })
    })
    req.end(body)
  })
