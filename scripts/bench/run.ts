/**
 * `npm run bench [-- --quick] [-- --sqlite-only] [-- --skip-ingest]`: measures svc over HTTP on
 * SQLite (and Postgres when one answers) against the floor, a bare node:http + better-sqlite3
 * server, in one run; then the Synthea ingest, and searches over what it loaded, on a svc with the
 * real R4 packages; a patient with its Observations by GraphQL against the same by REST (graphql.ts); then a
 * system-level `$export` of 10 copies of the Synthea data (export.ts).
 * Governance and SMART bearer tokens are priced against servers without them.
 * Prints one table and writes the same figures to bench/results/<YYYY-MM-DD>T<HH-MM>.json.
 * See docs/performance.md.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, relative } from "node:path"
import { parseArgs } from "node:util"
import type { Child } from "./children.ts"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "./cleanup.ts"
import { measureInTurn } from "./inTurn.ts"
import { runLoad } from "./load.ts"
import { watchMemory } from "./memory.ts"
import { createBenchDatabase, postgresUnavailable, shownAdminUrl } from "./postgres.ts"
import { postgresR4, sqliteR4 } from "./template.ts"
import { formatTable, type Report, type Row, type Share, writeJson } from "./report.ts"
import { seedFloor, seedSvc } from "./seed.ts"
import { startSmartSvc } from "./smart.ts"
import { connectionCount, holdLiveQueries, liveQueryCount, relevantWrites, type SyncLatency } from "./sync.ts"
import { createSubscriptions, ingestInTurn, type Latency, notificationLatency, startBenchReceiver, subscriptionCount } from "./subscriptions.ts"
import { loadSynthea, syntheaMissing } from "./ingest.ts"
import { type Backend, npmRegistry, type Packages, root, startFloor, startSvc, ungoverned } from "./servers.ts"
import { formatValidation, measureValidation } from "./validation.ts"
import { benchPrimaryAndReplica, type ClusterRun } from "./cluster.ts"
import { benchExport, describeExport, type ExportFigures, exportSettings, exportWorkload } from "./export.ts"
import { benchGraphQL, describeGraphQL, type GraphQLFigures, graphqlRows, graphqlSettings, graphqlWorkloads } from "./graphql.ts"
import { describeGoal, type DrivenWorkload, ingestFour, ingestOne, isDriven, type LoadWorkload, onSynthea, quickBundles, readById, searchIdentifier, type Target, type Workload, workloads } from "./suite.ts"

const usage = `usage: npm run bench [-- --quick] [-- --sqlite-only] [-- --skip-ingest] [-- --cluster-only]
  --quick         3 s per workload after a 2 s warm-up (default 10 s after 5 s); ${quickBundles} Synthea bundles (default all 55); the export after the 55 once (default 10 times)
  --sqlite-only   skip Postgres even when a server answers
  --skip-ingest   skip the Synthea ingest, the searches over it, GraphQL and the export (they need the npm registry once, for the real R4 packages)
  --cluster-only  only the Postgres primary with a replica against the primary alone`

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean" },
    "sqlite-only": { type: "boolean" },
    "skip-ingest": { type: "boolean" },
    "cluster-only": { type: "boolean" },
    help: { type: "boolean", short: "h" }
  }
})
if (flags.help) {
  console.log(usage)
  process.exit(0)
}

const quick = flags.quick === true
// The warm-up is long because svc's read path needs a few seconds of JIT before its figures settle.
const settings = { seconds: quick ? 2 : 10, warmupSeconds: quick ? 1 : 5, poolSize: 1000, syntheaBundles: quick ? quickBundles : 55, idleSeconds: quick ? 4 : 5 }
const progress = (message: string) => console.error(`[bench] ${message}`)

type Measured = Omit<Row, "floorRatio" | "met">

const load = async (target: Target, workload: LoadWorkload, startWindow: () => void) => {
  progress(`${target.server} ${target.backend}: ${workload.name}, ${workload.connections} connections, ${settings.warmupSeconds} s warm-up + ${settings.seconds} s`)
  const requests = await workload.prepare(target)
  startWindow()
  return runLoad({
    url: target.url,
    requests,
    connections: workload.connections,
    warmupSeconds: settings.warmupSeconds,
    seconds: settings.seconds,
    signal: interrupted.signal,
    headers: target.headers
  })
}

const drive = async (target: Target, workload: DrivenWorkload, startWindow: () => void) => {
  const options = { quick, signal: interrupted.signal }
  progress(`${target.server} ${target.backend}: ${workload.name}, ${workload.connections} connections, ${workload.progress(options)} after a warm-up`)
  await workload.warmUp(target, options)
  startWindow()
  return workload.drive(target, options)
}

/** Runs `list` against a started server, each workload in its own memory window. */
const measureAll = async (child: Child, target: Target, list: ReadonlyArray<Workload>): Promise<Array<Measured>> => {
  const memory = watchMemory(child.pid)
  const measured: Array<Measured> = []
  try {
    for (const workload of list) {
      const measurement = isDriven(workload) ? await drive(target, workload, memory.startWindow) : await load(target, workload, memory.startWindow)
      measured.push({
        workload: workload.name,
        server: target.server,
        backend: target.backend,
        connections: workload.connections,
        ...measurement,
        peakRssMb: memory.windowPeakMb(),
        target: describeGoal(workload.goals?.[target.backend])
      })
    }
    // svc-sqlite, svc-postgres, svc-sqlite-r4 (the server with the real R4 packages), ..., floor-better-sqlite3
    const server = child.name.startsWith("svc") ? child.name : `${target.server}-${target.backend}`
    serverPeakRssMb[server] = memory.lifetimePeakMb()
    if (target.server === "svc") {
      // What the server keeps once the load is over: its resident memory after an idle moment.
      progress(`${server}: ${settings.idleSeconds} s idle, then its resident memory`)
      await new Promise((resolve) => setTimeout(resolve, settings.idleSeconds * 1000))
      serverRssAfterRunMb[server] = memory.currentMb()
    }
    return measured
  } finally {
    memory.stop()
  }
}

const serverPeakRssMb: Record<string, number | undefined> = {}
/** Each svc's resident memory after all its workloads and an idle moment, MB. */
const serverRssAfterRunMb: Record<string, number | undefined> = {}
/** The target for the resident memory after the run. */
const rssAfterRunTargetMb = 300
const notices: Array<string> = []

const benchFloor = async (workDir: string): Promise<Array<Measured>> => {
  const file = join(workDir, "floor.sqlite")
  const ids = seedFloor(file, settings.poolSize)
  const child = await startFloor(file, workDir)
  const measured = await measureAll(child, { server: "floor", backend: "better-sqlite3", url: child.url, ids }, workloads.filter((w) => w.onFloor))
  await child.stop()
  return measured
}

const benchSvc = async (backend: Backend, workDir: string): Promise<Array<Measured>> => {
  progress(`svc ${backend.kind}: starting`)
  const child = await startSvc(backend, workDir)
  progress(`svc ${backend.kind}: creating ${settings.poolSize} Patients`)
  const ids = await seedSvc(child.url, settings.poolSize)
  const measured = await measureAll(child, { server: "svc", backend: backend.kind, url: child.url, ids }, workloads.filter((w) => !onSynthea(w)))
  await child.stop()
  return measured
}

/** The Synthea workloads (the ingest, then the searches), on a svc of their own with the real R4 packages, on a copy of the R4 template. */
const benchSvcR4 = async (backend: Backend, workDir: string, packages: Packages): Promise<Array<Measured>> => {
  progress(`svc ${backend.kind} with the real R4 packages: starting`)
  const child = await startSvc(backend, workDir, packages)
  const measured = await measureAll(child, { server: "svc", backend: backend.kind, url: child.url, ids: [] }, workloads.filter(onSynthea))
  await child.stop()
  restartMs[backend.kind] = await measureRestart(backend, workDir, packages)
  return measured
}

/** The server name of the rows measured with governance off. */
const ungovernedServer = "svc, governance off"

/** One of the two servers of a comparison in turn: a started svc, and the headers its pool and its load go with. */
interface InTurnServer {
  readonly server: string
  readonly child: Child
  readonly seedHeaders?: Readonly<Record<string, string>>
  readonly loadHeaders?: Readonly<Record<string, string>>
}

/**
 * Each workload of `list` on `reference` and `candidate`, loaded in turn (inTurn.ts): each creates its own pool
 * first. The rows are those of the server that is not the default `svc` (its figures pooled over the rounds);
 * the shares, the candidate's rate over the reference's, carry both rates and each round's share.
 */
const compareInTurn = async (
  backend: Backend["kind"],
  reference: InTurnServer,
  candidate: InTurnServer,
  list: ReadonlyArray<Workload>,
  target: number
): Promise<{ readonly rows: Array<Measured>; readonly shares: Array<Share> }> => {
  const watches = [reference, candidate].map((side) => ({ side, memory: watchMemory(side.child.pid) }))
  try {
    const targets: Array<Target> = []
    for (const side of [reference, candidate]) {
      progress(`${side.server} ${backend}: creating ${settings.poolSize} Patients`)
      const ids = await seedSvc(side.child.url, settings.poolSize, { headers: side.seedHeaders ?? {} })
      targets.push({ server: side.server, backend, url: side.child.url, ids, ...(side.loadHeaders === undefined ? {} : { headers: side.loadHeaders }) })
    }
    const rows: Array<Measured> = []
    const shares: Array<Share> = []
    for (const workload of list) {
      if (isDriven(workload)) throw new Error(`${workload.name}: a driven workload cannot be loaded in turn`)
      progress(`${candidate.server} against ${reference.server}, ${backend}: ${workload.name}, ${workload.connections} connections, ` +
        `${inTurn.warmupSeconds} s warm-up each, then ${inTurn.rounds} rounds of ${inTurn.sliceSeconds} s on each in turn`)
      const sides = []
      for (const t of targets) sides.push({ url: t.url, requests: await workload.prepare(t), headers: t.headers })
      const [referenceSide, candidateSide] = sides
      if (referenceSide === undefined || candidateSide === undefined) throw new Error("compareInTurn: two servers expected")
      const result = await measureInTurn(referenceSide, candidateSide, { ...inTurn, connections: workload.connections, signal: interrupted.signal })
      for (const [side, measurement] of [[reference, result.reference], [candidate, result.candidate]] as const) {
        if (side.server === "svc") continue
        rows.push({ workload: workload.name, server: side.server, backend, connections: workload.connections, ...measurement, peakRssMb: undefined, target: "" })
      }
      shares.push({
        workload: workload.name, backend, connections: workload.connections, share: result.share, target, inTurn: true,
        candidateReqPerSec: result.candidate.reqPerSec, referenceReqPerSec: result.reference.reqPerSec, roundShares: result.roundShares
      })
    }
    return { rows, shares }
  } finally {
    for (const { side, memory } of watches) {
      serverPeakRssMb[side.child.name] = memory.lifetimePeakMb()
      memory.stop()
    }
  }
}

/** Rounds of the comparisons in turn: 8 of 3 s on each server after 5 s of warm-up (4 of 1 s after 1 s with --quick). */
const inTurn = quick ? { warmupSeconds: 1, rounds: 4, sliceSeconds: 1 } : { warmupSeconds: 5, rounds: 8, sliceSeconds: 3 }

/** Shares measured in turn, by check. */
const sharesInTurn: { governance: Array<Share>; smart: Array<Share>; subscriptions: Array<Share>; sync: Array<Share> } = { governance: [], smart: [], subscriptions: [], sync: [] }

/**
 * Read by id on a svc with governance off (no metering, no stored request log, no audit trail) and on one with
 * its defaults, started at once on fresh databases and loaded in turn (docs/governance.md, "What it costs").
 */
const benchUngoverned = async (backends: readonly [Backend, Backend], workDir: string): Promise<Array<Measured>> => {
  progress(`svc ${backends[0].kind} with governance off, and one with its defaults: starting`)
  const off = await startSvc(backends[0], workDir, undefined, { name: `svc-${backends[0].kind}-ungoverned`, config: ungoverned })
  const stopOff = onCleanup("stopping the svc with governance off", off.stop)
  const on = await startSvc(backends[1], workDir, undefined, { name: `svc-${backends[1].kind}-beside-ungoverned` })
  const stopOn = onCleanup("stopping the svc beside it", on.stop)
  try {
    const compared = await compareInTurn(backends[0].kind, { server: ungovernedServer, child: off }, { server: "svc", child: on }, [readById], 0.85)
    sharesInTurn.governance.push(...compared.shares)
    return compared.rows
  } finally {
    await stopOn()
    await stopOff()
  }
}

/**
 * The ingests on a svc with governance off, on a fresh copy of the R4 template: one client and then four, as
 * the default server runs them, so that the four clients' ingest of each finds the same database.
 */
const benchUngovernedIngest = async (backend: Backend, workDir: string, packages: Packages): Promise<Array<Measured>> => {
  progress(`svc ${backend.kind} with the real R4 packages and governance off: starting`)
  const child = await startSvc(backend, workDir, packages, { name: `svc-${backend.kind}-r4-ungoverned`, config: ungoverned })
  const measured = await measureAll(child, { server: ungovernedServer, backend: backend.kind, url: child.url, ids: [] }, [ingestOne, ingestFour])
  await child.stop()
  return measured
}

/** The server name of the rows measured with SMART on, every request with a bearer token. */
const smartServer = "svc --smart, bearer token"

/**
 * Read by id and the token search on a svc without `--smart` and one with SMART on (docs/smart.md), started at
 * once on fresh databases and loaded in turn; every request to the second carries an access token of
 * `system/*.rs`, a whole grant that keeps the fast path (docs/smart.md, "Scopes"). Its pool is created with a
 * token of `system/*.cruds`.
 */
const benchSmart = async (backends: readonly [Backend, Backend], workDir: string): Promise<Array<Measured>> => {
  progress(`svc ${backends[0].kind}, and one with SMART on: starting`)
  const plain = await startSvc(backends[0], workDir, undefined, { name: `svc-${backends[0].kind}-beside-smart` })
  const stopPlain = onCleanup("stopping the svc beside the SMART one", plain.stop)
  const smart = await startSmartSvc(backends[1], workDir)
  const stopSmart = onCleanup("stopping the svc with SMART on", smart.child.stop)
  try {
    const candidate = {
      server: smartServer,
      child: smart.child,
      seedHeaders: await smart.authorization("system/*.cruds"),
      loadHeaders: await smart.authorization("system/*.rs")
    }
    const compared = await compareInTurn(backends[0].kind, { server: "svc", child: plain }, candidate, [readById, searchIdentifier], 0.9)
    sharesInTurn.smart.push(...compared.shares)
    return compared.rows
  } finally {
    await stopSmart()
    await stopPlain()
  }
}

/** The server name of the rows measured with 10,000 Subscriptions that match nothing. */
const subscribedServer = "svc, 10,000 Subscriptions"

/** Notification latency by backend. */
const latencies: Record<string, Latency> = {}

/**
 * The Synthea ingest (4 clients) on a svc with 10,000 active Subscriptions that match nothing and on one without,
 * started at once on copies of the R4 template and fed the bundles in turn (subscriptions.ts); then the latency
 * from commit to a receiver on loopback, on the svc with the Subscriptions.
 */
const benchSubscriptions = async (backends: readonly [Backend, Backend], workDir: string, packages: Packages): Promise<Array<Measured>> => {
  const kind = backends[0].kind
  progress(`svc ${kind} with the real R4 packages, and one with ${subscriptionCount} Subscriptions: starting`)
  const receiver = await startBenchReceiver()
  const closeReceiver = onCleanup("closing the notification receiver", receiver.close)
  const plain = await startSvc(backends[0], workDir, packages, { name: `svc-${kind}-r4-beside-subscriptions` })
  const stopPlain = onCleanup("stopping the svc beside the subscribed one", plain.stop)
  const subscribed = await startSvc(backends[1], workDir, packages, { name: `svc-${kind}-r4-subscriptions` })
  const stopSubscribed = onCleanup("stopping the svc with Subscriptions", subscribed.stop)
  try {
    progress(`${subscribedServer} ${kind}: creating the Subscriptions`)
    await createSubscriptions(subscribed.url, subscriptionCount, `${receiver.url}/never`)
    const bundles = loadSynthea(settings.syntheaBundles)
    const warmUp = bundles.slice(0, quick ? 1 : 5)
    progress(`${subscribedServer} against svc, ${kind}: ingest, 4 connections, ${bundles.length - warmUp.length} Synthea bundles in turn after ${warmUp.length} each`)
    await ingestInTurn(plain.url, subscribed.url, warmUp, { chunk: warmUp.length, connections: 1, signal: interrupted.signal })
    const result = await ingestInTurn(plain.url, subscribed.url, bundles.slice(warmUp.length), { chunk: quick ? 1 : 5, connections: 4, signal: interrupted.signal })
    if (receiver.arrivals.length > 0) notices.push(`${receiver.arrivals.length} notifications reached the Subscriptions that should match nothing on ${kind}`)
    const count = quick ? 50 : 200
    progress(`${subscribedServer} ${kind}: notification latency over ${count} creates, one at a time`)
    latencies[kind] = await notificationLatency(subscribed.url, receiver, count, interrupted.signal)
    sharesInTurn.subscriptions.push({
      workload: ingestFour.name, backend: kind, connections: 4, share: result.share, target: 0.9, inTurn: true,
      candidateReqPerSec: result.candidate.resourcesPerSec ?? 0, referenceReqPerSec: result.reference.resourcesPerSec ?? 0, roundShares: result.roundShares
    })
    return [{ workload: ingestFour.name, server: subscribedServer, backend: kind, connections: 4, ...result.candidate, peakRssMb: undefined, target: "" }]
  } finally {
    await stopSubscribed()
    await stopPlain()
    await closeReceiver()
  }
}

/** The server name of the rows measured with 10,000 live queries. */
const liveServer = "svc, 10,000 live queries"

/** Live-query figures by backend: commit-to-client latency, memory per query. */
const syncFigures: Record<string, SyncLatency & { readonly kbPerQuery: number | undefined }> = {}

/**
 * The Synthea ingest (4 clients) on a svc holding 10,000 live queries on 100 connections and on one holding none,
 * in turn (sync.ts); meanwhile relevant writes to the first, the same writes to the second, and the time from each
 * commit to the client's `changes`. The server's memory before and after the queries were taken, per query.
 */
const benchSync = async (backends: readonly [Backend, Backend], workDir: string, packages: Packages): Promise<Array<Measured>> => {
  const kind = backends[0].kind
  progress(`svc ${kind} with the real R4 packages, and one with ${liveQueryCount} live queries: starting`)
  const plain = await startSvc(backends[0], workDir, packages, { name: `svc-${kind}-r4-beside-sync` })
  const stopPlain = onCleanup("stopping the svc beside the one with live queries", plain.stop)
  const live = await startSvc(backends[1], workDir, packages, { name: `svc-${kind}-r4-sync` })
  const stopLive = onCleanup("stopping the svc with live queries", live.stop)
  const memory = watchMemory(live.pid)
  try {
    progress(`${liveServer} ${kind}: ${liveQueryCount} live queries on ${connectionCount} connections`)
    const twin = await holdLiveQueries(plain.url).then((load) => {
      // The same Patients on the server without live queries, its connections closed: the ingest meets the same database.
      load.close()
      return load
    })
    // Each read after an idle moment, in which the server collects its garbage (src/app/IdleCollect.ts): what the
    // queries hold, not what taking them left behind.
    const idle = () => new Promise((resolve) => setTimeout(resolve, settings.idleSeconds * 1000))
    await idle()
    const before = memory.currentMb()
    const load = await holdLiveQueries(live.url)
    await idle()
    const after = memory.currentMb()
    const closeClients = onCleanup("closing the /sync clients", () => load.close())
    const bundles = loadSynthea(settings.syntheaBundles)
    const warmUp = bundles.slice(0, quick ? 1 : 5)
    await ingestInTurn(plain.url, live.url, warmUp, { chunk: warmUp.length, connections: 1, signal: interrupted.signal })
    progress(`${liveServer} against svc, ${kind}: ingest, 4 connections, ${bundles.length - warmUp.length} Synthea bundles in turn, with relevant writes`)
    let ingesting = true
    const latency = relevantWrites(live.url, load, () => ingesting)
    const twinWrites = relevantWrites(plain.url, twin, () => ingesting)
    const result = await ingestInTurn(plain.url, live.url, bundles.slice(warmUp.length), { chunk: quick ? 1 : 5, connections: 4, signal: interrupted.signal })
      .finally(() => void (ingesting = false))
    const figures = await latency
    await twinWrites
    syncFigures[kind] = {
      ...figures,
      kbPerQuery: before === undefined || after === undefined ? undefined : ((after - before) * 1024) / liveQueryCount
    }
    sharesInTurn.sync.push({
      workload: ingestFour.name, backend: kind, connections: 4, share: result.share, target: 0.9, inTurn: true,
      candidateReqPerSec: result.candidate.resourcesPerSec ?? 0, referenceReqPerSec: result.reference.resourcesPerSec ?? 0, roundShares: result.roundShares
    })
    await closeClients()
    return [{ workload: ingestFour.name, server: liveServer, backend: kind, connections: 4, ...result.candidate, peakRssMb: undefined, target: "" }]
  } finally {
    memory.stop()
    await stopLive()
    await stopPlain()
  }
}

/** The export's settings: the 55 bundles loaded 10 times before it, once with --quick. */
const exporting = exportSettings(quick)
/** The export's figures by backend (export.ts). */
const exportRuns: Array<ExportFigures> = []

/**
 * The export (export.ts) on a svc of its own on `backend`, a fresh copy of the R4 template: a row of the table (its
 * resources per second, its peak RSS), the rest under it. A failure is a notice, so that the run keeps the figures
 * measured before it.
 */
const benchExportOn = async (backend: Backend, workDir: string, packages: Packages): Promise<Array<Measured>> => {
  try {
    const figures = await benchExport(backend, workDir, packages, loadSynthea(), exporting, progress)
    exportRuns.push(figures)
    serverPeakRssMb[`svc-${backend.kind}-r4-export`] = figures.peakRssLifetimeMb
    serverRssAfterRunMb[`svc-${backend.kind}-r4-export`] = figures.rssAfterIdleMb
    if (figures.mismatches.length > 0) notices.push(`$export on ${backend.kind}: ${figures.mismatches.length} mismatches (${figures.mismatches.slice(0, 3).join("; ")})`)
    return [{
      workload: exportWorkload(exporting).name, server: "svc", backend: backend.kind, connections: exportWorkload(exporting).connections,
      reqPerSec: Number.NaN, resourcesPerSec: figures.resourcesPerSec, medianMs: Number.NaN, p99Ms: Number.NaN,
      ok: figures.files, non2xx: 0, errors: 0, seconds: figures.secondsToManifest, statusCodes: {}, peakRssMb: figures.peakRssExportMb, target: ""
    }]
  } catch (error) {
    if (interrupted.signal.aborted) throw error
    notices.push(`$export on ${backend.kind} failed: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
    progress(notices[notices.length - 1] ?? "")
    return []
  }
}

/** GraphQL's settings: a patient and its 20 Observations, each side 8 rounds of 1 s (4 of 0.5 s with --quick). */
const graphqlRun = graphqlSettings(quick)
/** GraphQL's figures by backend (graphql.ts). */
const graphqlRuns: Array<GraphQLFigures> = []
/** Whether GraphQL failed on a backend (its answers differed from REST's, or it could not run): the run then exits 1. */
let graphqlFailed = false

/**
 * GraphQL against REST (graphql.ts) on a svc of its own on `backend`, a fresh copy of the R4 template: a row per side,
 * the ratios under the table. A failure is a notice, so that the run keeps the figures measured before it, and the
 * run's exit status.
 */
const benchGraphQLOn = async (backend: Backend, workDir: string, packages: Packages): Promise<Array<Measured>> => {
  try {
    const figures = await benchGraphQL(backend, workDir, packages, graphqlRun, progress)
    graphqlRuns.push(figures)
    if (figures.graphql.failed + figures.rest.failed > 0) {
      graphqlFailed = true
      notices.push(`GraphQL on ${backend.kind}: ${figures.graphql.failed} GraphQL and ${figures.rest.failed} REST iterations failed (${figures.firstFailure ?? "?"})`)
    }
    return graphqlRows(figures, graphqlRun)
  } catch (error) {
    if (interrupted.signal.aborted) throw error
    graphqlFailed = true
    notices.push(`GraphQL on ${backend.kind} FAILED: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
    progress(notices[notices.length - 1] ?? "")
    return []
  }
}

interface Pair {
  readonly workload: string
  readonly connections: number
  readonly target: number
  readonly rate: (m: Measured) => number
}

/** The rates of `server` over those of `reference` for each pair of workload and connections, backend by backend. */
const sharesOf = (measured: ReadonlyArray<Measured>, server: string, reference: string, pairs: ReadonlyArray<Pair>): Array<Share> => {
  const shares: Array<Share> = []
  for (const pair of pairs) {
    for (const base of measured.filter((m) => m.server === reference && m.workload === pair.workload && m.connections === pair.connections)) {
      const other = measured.find((m) => m.server === server && m.backend === base.backend && m.workload === pair.workload && m.connections === pair.connections)
      if (other !== undefined && pair.rate(base) > 0) {
        shares.push({ workload: pair.workload, backend: base.backend, connections: pair.connections, share: pair.rate(other) / pair.rate(base), target: pair.target })
      }
    }
  }
  return shares
}

/**
 * What governance's defaults keep of the server's speed, against its targets (read by id 85%, ingest 90%): read
 * by id measured in turn, the ingest (which changes the database it measures, so cannot be sliced) on two
 * servers one after the other.
 */
const governanceShares = (measured: ReadonlyArray<Measured>) => [
  ...sharesInTurn.governance,
  ...sharesOf(measured, "svc", ungovernedServer, [
    { workload: ingestFour.name, connections: ingestFour.connections, target: 0.9, rate: (m) => m.resourcesPerSec ?? 0 }
  ])
]

// Rounded down, so that a share just under its target never reads as the target.
const describeShare = (share: Share): string => {
  const inTurn = share.inTurn === true && share.candidateReqPerSec !== undefined && share.referenceReqPerSec !== undefined
    ? `, ${Math.round(share.candidateReqPerSec)} against ${Math.round(share.referenceReqPerSec)} req/s in turn, rounds ` +
      `${Math.floor(100 * Math.min(...(share.roundShares ?? [])))}% to ${Math.floor(100 * Math.max(...(share.roundShares ?? [])))}%`
    : ""
  return `${share.workload} on ${share.backend} ${Math.floor(100 * share.share)}% (target >= ${100 * share.target}%${share.share >= share.target ? "" : ", MISSED"}${inTurn})`
}

/** The median of three restarts (one with --quick) on the database the Synthea workloads left: process start to `/readyz` 200. */
const measureRestart = async (backend: Backend, workDir: string, packages: Packages): Promise<number> => {
  const restarts = quick ? 1 : 3
  progress(`svc ${backend.kind}: restart to /readyz with the R4 packages installed, ${restarts} time(s)`)
  const times: Array<number> = []
  for (let i = 0; i < restarts; i++) {
    const startedAt = performance.now()
    const child = await startSvc(backend, workDir, packages)
    times.push(performance.now() - startedAt)
    await child.stop()
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!
}

/** Restart times by backend, in ms. */
const restartMs: Record<string, number> = {}
/** The target for a restart with the packages installed. */
const restartTargetMs = 2000

/** The real R4 packages for the Synthea workloads, or undefined (with a notice) when they are skipped. */
const r4Packages = async (): Promise<Packages | undefined> => {
  if (!workloads.some(onSynthea)) return undefined
  const skipped = (why: string) => {
    notices.push(`Synthea ingest and searches, GraphQL and the export skipped: ${why}`)
    progress(notices[notices.length - 1] ?? "")
    return undefined
  }
  if (flags["skip-ingest"]) return skipped("--skip-ingest")
  const missing = syntheaMissing()
  if (missing !== undefined) return skipped(missing)
  const registry = await npmRegistry()
  return "why" in registry ? skipped(registry.why) : { kind: "r4", registry: registry.registry }
}

/** The rows with their floor ratios and targets; a row of the SMART server is held to its share of the server without. */
const withRatios = (measured: ReadonlyArray<Measured>, smart: ReadonlyArray<Share>): Array<Row> => {
  const floorRead = measured.find((m) => m.server === "floor" && m.workload === readById.name)?.reqPerSec
  return measured.map((m) => {
    const workload = workloads.find((w) => w.name === m.workload && w.connections === m.connections)
    // A driven workload's requests (whole transactions) are not comparable with the floor's reads.
    const comparable = m.server === "svc" && workload !== undefined && !isDriven(workload)
    const floorRatio = comparable && floorRead !== undefined && floorRead > 0 ? m.reqPerSec / floorRead : undefined
    const goal = workload?.goals?.[m.backend]
    const checks: Array<boolean> = []
    if (m.server === "svc" && goal?.minFloorRatio !== undefined && floorRatio !== undefined) checks.push(floorRatio >= goal.minFloorRatio)
    if (m.server === "svc" && goal?.maxMedianMs !== undefined) checks.push(m.medianMs <= goal.maxMedianMs)
    if (m.server === "svc" && goal?.maxP99Ms !== undefined) checks.push(m.p99Ms <= goal.maxP99Ms)
    if (m.server === "svc" && goal?.minResourcesPerSec !== undefined) checks.push((m.resourcesPerSec ?? 0) >= goal.minResourcesPerSec)
    const met = m.server === "svc" && checks.length > 0 ? checks.every(Boolean) : undefined
    if (m.server === smartServer) {
      const share = smart.find((s) => s.workload === m.workload && s.backend === m.backend && s.connections === m.connections)
      return share === undefined
        ? { ...m, target: "", floorRatio, met: undefined }
        : { ...m, target: `≥ ${100 * share.target}% of svc without --smart`, floorRatio, met: share.share >= share.target }
    }
    return { ...m, target: m.server === "svc" ? m.target : "", floorRatio, met }
  })
}

/** The figures of a primary with a replica against the primary alone (cluster.ts). */
const clusterRuns: Array<ClusterRun> = []

/**
 * Read by id and the token search on a Postgres primary alone, then through it and a replica at once
 * (docs/cluster.md), on one database and one pool of Patients.
 */
const benchCluster = async (backend: Extract<Backend, { kind: "postgres" }>, workDir: string): Promise<Array<Measured>> => {
  progress("svc primary, postgres: starting")
  const primary = await startSvc(backend, workDir, undefined, { name: "svc-postgres-primary" })
  const stopPrimary = onCleanup("stopping the primary", primary.stop)
  try {
    progress(`svc primary, postgres: creating ${settings.poolSize} Patients`)
    const ids = await seedSvc(primary.url, settings.poolSize)
    const runs = await benchPrimaryAndReplica({
      backend,
      primary,
      ids,
      workloads: [readById, searchIdentifier].filter((w): w is LoadWorkload => !isDriven(w)),
      startReplica: () => startSvc(backend, workDir, undefined, { name: "svc-postgres-replica", env: { SVC_ROLE: "replica", SVC_PRIMARY_URL: primary.url } }),
      load: { warmupSeconds: settings.warmupSeconds, seconds: settings.seconds, signal: interrupted.signal },
      progress
    })
    clusterRuns.push(...runs)
    return runs.flatMap((run) => [
      { workload: run.workload, server: "svc primary alone", backend: "postgres", connections: run.connections, ...run.alone, peakRssMb: undefined, target: "" },
      { workload: run.workload, server: "svc primary + replica", backend: "postgres", connections: run.connections, ...run.both, peakRssMb: undefined, target: "" }
    ])
  } finally {
    await stopPrimary()
  }
}

const main = async (): Promise<void> => {
  installSignalHandlers()
  const startedAt = new Date().toISOString()
  const startedAtMs = performance.now()
  const loadAverageAtStart = loadavg().map((load) => Math.round(load * 100) / 100)
  const workDir = mkdtempSync(join(tmpdir(), "svc-bench-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))

  const clusterOnly = flags["cluster-only"] === true
  const packages = clusterOnly ? undefined : await r4Packages()
  const measured: Array<Measured> = clusterOnly ? [] : [...(await benchFloor(workDir))]
  if (!clusterOnly) {
  measured.push(...(await benchSvc({ kind: "sqlite", file: join(workDir, "svc.sqlite") }, workDir)))
  measured.push(...(await benchSmart([
    { kind: "sqlite", file: join(workDir, "svc-beside-smart.sqlite") },
    { kind: "sqlite", file: join(workDir, "svc-smart.sqlite") }
  ], workDir)))
  measured.push(...(await benchUngoverned([
    { kind: "sqlite", file: join(workDir, "svc-ungoverned.sqlite") },
    { kind: "sqlite", file: join(workDir, "svc-beside-ungoverned.sqlite") }
  ], workDir)))
  if (packages !== undefined) {
    const backend = await sqliteR4(join(workDir, "svc-r4.sqlite"), workDir, packages, progress)
    measured.push(...(await benchSvcR4(backend, workDir, packages)))
    const ungovernedBackend = await sqliteR4(join(workDir, "svc-r4-ungoverned.sqlite"), workDir, packages, progress)
    measured.push(...(await benchUngovernedIngest(ungovernedBackend, workDir, packages)))
    measured.push(...(await benchSubscriptions([
      await sqliteR4(join(workDir, "svc-r4-beside-subscriptions.sqlite"), workDir, packages, progress),
      await sqliteR4(join(workDir, "svc-r4-subscriptions.sqlite"), workDir, packages, progress)
    ], workDir, packages)))
    measured.push(...(await benchSync([
      await sqliteR4(join(workDir, "svc-r4-beside-sync.sqlite"), workDir, packages, progress),
      await sqliteR4(join(workDir, "svc-r4-sync.sqlite"), workDir, packages, progress)
    ], workDir, packages)))
    const graphqlFile = join(workDir, "svc-r4-graphql.sqlite")
    measured.push(...(await benchGraphQLOn(await sqliteR4(graphqlFile, workDir, packages, progress), workDir, packages)))
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${graphqlFile}${suffix}`, { force: true })
    const exportFile = join(workDir, "svc-r4-export.sqlite")
    measured.push(...(await benchExportOn(await sqliteR4(exportFile, workDir, packages, progress), workDir, packages)))
    // The SQLite file of ~140,000 resources is not needed any more.
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${exportFile}${suffix}`, { force: true })
  }
  }

  if (flags["sqlite-only"]) {
    notices.push("Postgres skipped: --sqlite-only")
  } else {
    const why = await postgresUnavailable()
    if (why !== undefined) {
      notices.push(`Postgres skipped: no server answers at ${shownAdminUrl()} (${why})`)
      progress(notices[notices.length - 1] ?? "")
    } else {
      if (!clusterOnly) {
        const database = await createBenchDatabase()
        const drop = onCleanup("dropping the Postgres database", database.drop)
        measured.push(...(await benchSvc({ kind: "postgres", url: database.url }, workDir)))
        await drop()
      }
      const clusterDatabase = await createBenchDatabase()
      const dropCluster = onCleanup("dropping the Postgres database", clusterDatabase.drop)
      measured.push(...(await benchCluster({ kind: "postgres", url: clusterDatabase.url }, workDir)))
      await dropCluster()
      for (const bench of clusterOnly ? [] : [benchSmart, benchUngoverned]) {
        const databases = [await createBenchDatabase(), await createBenchDatabase()] as const
        const drops = databases.map((d) => onCleanup("dropping the Postgres database", d.drop))
        measured.push(...(await bench([{ kind: "postgres", url: databases[0].url }, { kind: "postgres", url: databases[1].url }], workDir)))
        for (const drop of drops) await drop()
      }
      if (packages !== undefined) {
        const r4Database = await postgresR4(workDir, packages, progress)
        const dropR4 = onCleanup("dropping the Postgres database", r4Database.drop)
        measured.push(...(await benchSvcR4(r4Database.backend, workDir, packages)))
        await dropR4()
        const ungovernedR4 = await postgresR4(workDir, packages, progress)
        const dropUngovernedR4 = onCleanup("dropping the Postgres database", ungovernedR4.drop)
        measured.push(...(await benchUngovernedIngest(ungovernedR4.backend, workDir, packages)))
        await dropUngovernedR4()
        const besideSubscriptions = await postgresR4(workDir, packages, progress)
        const dropBeside = onCleanup("dropping the Postgres database", besideSubscriptions.drop)
        const withSubscriptions = await postgresR4(workDir, packages, progress)
        const dropWith = onCleanup("dropping the Postgres database", withSubscriptions.drop)
        measured.push(...(await benchSubscriptions([besideSubscriptions.backend, withSubscriptions.backend], workDir, packages)))
        await dropWith()
        await dropBeside()
        const besideSync = await postgresR4(workDir, packages, progress)
        const dropBesideSync = onCleanup("dropping the Postgres database", besideSync.drop)
        const withSync = await postgresR4(workDir, packages, progress)
        const dropWithSync = onCleanup("dropping the Postgres database", withSync.drop)
        measured.push(...(await benchSync([besideSync.backend, withSync.backend], workDir, packages)))
        await dropWithSync()
        await dropBesideSync()
        const graphqlDatabase = await postgresR4(workDir, packages, progress)
        const dropGraphQL = onCleanup("dropping the Postgres database", graphqlDatabase.drop)
        measured.push(...(await benchGraphQLOn(graphqlDatabase.backend, workDir, packages)))
        await dropGraphQL()
        const exportDatabase = await postgresR4(workDir, packages, progress)
        const dropExport = onCleanup("dropping the Postgres database", exportDatabase.drop)
        measured.push(...(await benchExportOn(exportDatabase.backend, workDir, packages)))
        await dropExport()
      }
    }
  }

  const governance = governanceShares(measured)
  const smart = sharesInTurn.smart
  const rows = withRatios(measured, smart)
  for (const row of rows) {
    if (row.non2xx > 0 || row.errors > 0) {
      notices.push(`${row.workload} on ${row.server} ${row.backend}: ${row.non2xx} non-2xx responses, ${row.errors} connection errors (status codes ${JSON.stringify(row.statusCodes)})`)
    }
  }
  const described = workloads.map((w) => ({ name: w.name, description: w.description, connections: w.connections, target: Object.entries(w.goals ?? {}).map(([backend, goal]) => `${backend}: ${describeGoal(goal)}`).join("; ") }))
  if (graphqlRuns.length > 0) {
    const { graphql, rest } = graphqlWorkloads(graphqlRun)
    described.push({ ...graphql, target: "" }, { ...rest, target: "" })
  }
  if (exportRuns.length > 0) described.push({ ...exportWorkload(exporting), target: "" })
  const validation = clusterOnly ? undefined : await measureValidation(settings.syntheaBundles)
  if (validation === undefined && !clusterOnly) notices.push("validation not measured: the R4 packages could not be had")
  const elapsedSeconds = Math.round((performance.now() - startedAtMs) / 1000)
  const report: Report = {
    startedAt, elapsedSeconds, loadAverageAtStart, quick, settings, workloads: described, rows, serverPeakRssMb,
    serverRssAfterRunMb, rssAfterRunTargetMb, notices, validation, restartMs, governance, smart,
    subscriptions: { ingest: sharesInTurn.subscriptions, notificationLatency: latencies },
    sync: { ingest: sharesInTurn.sync, figures: syncFigures },
    graphql: { settings: graphqlRun, runs: graphqlRuns },
    export: { settings: exporting, runs: exportRuns },
    cluster: clusterRuns.map((run) => ({
      workload: run.workload,
      connections: run.connections,
      aloneReqPerSec: run.alone.reqPerSec,
      bothReqPerSec: run.both.reqPerSec,
      ratio: run.alone.reqPerSec > 0 ? run.both.reqPerSec / run.alone.reqPerSec : undefined
    }))
  }
  const file = writeJson(report)

  console.log(`svc bench${quick ? " (quick)" : ""}: ${settings.seconds} s per workload after ${settings.warmupSeconds} s warm-up, ` +
    `pool of ${settings.poolSize} Patients, ${settings.syntheaBundles} Synthea bundles per ingest, ${cpus().length} CPUs (load average ${loadAverageAtStart.join(" ")} at start), Node ${process.version}`)
  console.log("")
  console.log(formatTable(rows))
  console.log("")
  const peaks = Object.entries(serverPeakRssMb).map(([server, mb]) => `${server} ${mb === undefined ? "?" : mb.toFixed(0)} MB`)
  console.log(`Peak RSS over each server's life: ${peaks.join(", ")}`)
  const after = Object.entries(serverRssAfterRunMb).map(([server, mb]) =>
    `${server} ${mb === undefined ? "?" : `${mb.toFixed(0)} MB${mb < rssAfterRunTargetMb ? "" : " (MISSED)"}`}`)
  if (after.length > 0) console.log(`RSS of each svc after all its workloads and ${settings.idleSeconds} s idle (target < ${rssAfterRunTargetMb} MB): ${after.join(", ")}`)
  if (validation !== undefined) console.log(formatValidation(validation))
  const restarts = Object.entries(restartMs).map(([kind, ms]) => `${kind} ${(ms / 1000).toFixed(2)} s${ms <= restartTargetMs ? "" : " (MISSED)"}`)
  if (restarts.length > 0) console.log(`Restart to /readyz with the R4 packages installed (median of 3, 1 with --quick; target < ${restartTargetMs / 1000} s): ${restarts.join(", ")}`)
  if (governance.length > 0) console.log(`Governance on (its defaults) against off, same run (read by id in turn): ${governance.map(describeShare).join(", ")}`)
  if (smart.length > 0) console.log(`svc --smart with a bearer token (system/*.rs) against svc without --smart, in turn: ${smart.map(describeShare).join(", ")}`)
  if (sharesInTurn.subscriptions.length > 0) {
    console.log(`Ingest with ${subscriptionCount} Subscriptions that match nothing against none, in turn: ${sharesInTurn.subscriptions.map(describeShare).join(", ")}`)
  }
  const latencyLines = Object.entries(latencies).map(([kind, l]) => `${kind} median ${l.medianMs.toFixed(1)} ms, p99 ${l.p99Ms.toFixed(1)} ms (${l.count} notifications)`)
  if (latencyLines.length > 0) console.log(`Notification latency, commit to a receiver on loopback: ${latencyLines.join("; ")}`)
  if (sharesInTurn.sync.length > 0) {
    console.log(`Ingest with ${liveQueryCount} live queries on ${connectionCount} connections against none, in turn: ${sharesInTurn.sync.map(describeShare).join(", ")}`)
  }
  const syncLines = Object.entries(syncFigures).map(([kind, f]) =>
    `${kind} median ${f.medianMs.toFixed(1)} ms, p99 ${f.p99Ms.toFixed(1)} ms (${f.count} changes), ${f.kbPerQuery === undefined ? "?" : f.kbPerQuery.toFixed(1)} KB of server memory per live query`)
  if (syncLines.length > 0) console.log(`Live queries, commit to the client's changes message during the ingest: ${syncLines.join("; ")}`)
  const clusterLines = clusterRuns.map((run) =>
    `${run.workload} ${run.both.reqPerSec.toFixed(0)} req/s against ${run.alone.reqPerSec.toFixed(0)} (${(run.both.reqPerSec / run.alone.reqPerSec).toFixed(2)}x), median ${run.both.medianMs.toFixed(1)} ms against ${run.alone.medianMs.toFixed(1)} ms`)
  if (clusterLines.length > 0) console.log(`Postgres primary and replica at once against the primary alone: ${clusterLines.join("; ")}`)
  if (graphqlRuns.length > 0) {
    console.log(`GraphQL against REST, a patient and its ${graphqlRun.observationsPerPatient} Observations, in turn (ratios GraphQL over REST): ${graphqlRuns.map(describeGraphQL).join("; ")}`)
  }
  if (exportRuns.length > 0) {
    console.log(`$export (system level) after the Synthea bundles loaded ${exporting.copies} time(s): ${exportRuns.map(describeExport).join("; ")}`)
  }
  for (const notice of notices) console.log(`NOTICE: ${notice}`)
  console.log(`Written: ${relative(root, file)} (${elapsedSeconds} s in all)`)
  if (graphqlFailed) process.exitCode = 1
}

main()
  .catch((error: unknown) => {
    console.error(interrupted.signal.aborted ? String(interrupted.signal.reason) : error)
    process.exitCode = interrupted.signal.aborted ? 130 : 1
  })
  .finally(cleanupAll)
