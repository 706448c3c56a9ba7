/**
 * The workloads of `npm run bench`. A workload is a small object: its name, how many connections
 * drive it, whether the floor runs it too, its target, and either `prepare`, which readies the
 * server under test and returns the requests autocannon cycles through for the measured duration,
 * or `drive`, which runs the whole workload itself once and measures it (the Synthea ingest). To
 * add one, write it here and append it to `workloads`.
 */
import type autocannon from "autocannon"
import { loadSynthea, runIngest } from "./ingest.ts"
import type { Measurement } from "./load.ts"
import { identifierSystem, samplePatient } from "./patients.ts"
import { joinBundles, runReadsDuringIngest } from "./readsDuringIngest.ts"
import { rotation } from "./rotation.ts"
import {
  chainPaths, deepOffsetPaths, everythingPaths, familyPaths, hasPaths, includePaths, nextLinkPaths, pagedPaths, prepareSearch, tokenDatePaths,
  tokenPaths
} from "./search.ts"
import { terminologyWorkloads } from "./terminology.ts"

/** The server a workload runs against, with the pool of Patient ids created on it beforehand. */
export interface Target {
  /** `svc` or `floor` */
  readonly server: string
  /** `sqlite`, `postgres`, or `better-sqlite3` for the floor */
  readonly backend: string
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly ids: ReadonlyArray<string>
  /** Sent with every request besides the workload's own: the bearer token of a server under `--smart`. */
  readonly headers?: Readonly<Record<string, string>>
}

/** What a workload should reach; every field is optional so later workloads can state their own. */
export interface Goal {
  /** req/s of this workload over req/s of the floor's read by id */
  readonly minFloorRatio?: number
  readonly maxMedianMs?: number
  readonly maxP99Ms?: number
  /** Resources per second (the ingest) */
  readonly minResourcesPerSec?: number
}

interface Common {
  readonly name: string
  readonly description: string
  readonly connections: number
  /** Whether the floor server runs it too (the floor only answers reads by id). */
  readonly onFloor: boolean
  /**
   * The goal on each backend that has one (`sqlite`, `postgres`): the targets are SQLite's unless a workload
   * states one for Postgres too, as the ingest does.
   */
  readonly goals?: Partial<Record<string, Goal>>
}

/**
 * Driven by autocannon for the measured duration: on svc with the stand-in packages (Patient,
 * Observation), or, with `onSynthea`, on the svc with the real R4 packages after the ingest, over
 * the Synthea data it loaded.
 */
export interface LoadWorkload extends Common {
  readonly onSynthea?: boolean
  readonly prepare: (target: Target) => Promise<Array<autocannon.Request>>
}

export interface DriveOptions {
  readonly quick: boolean
  readonly signal: AbortSignal
}

/** Runs itself once, on a svc of its own with the real R4 packages (on a fresh database). */
export interface DrivenWorkload extends Common {
  /** What to say while it runs. */
  readonly progress: (options: DriveOptions) => string
  /** Readies the server with what is not measured (a warm-up). */
  readonly warmUp: (target: Target, options: DriveOptions) => Promise<void>
  readonly drive: (target: Target, options: DriveOptions) => Promise<Measurement>
}

export type Workload = LoadWorkload | DrivenWorkload

export const isDriven = (workload: Workload): workload is DrivenWorkload => "drive" in workload

const fhirJson = { "content-type": "application/fhir+json", accept: "application/fhir+json" }

export const create: Workload = {
  name: "create",
  description: "POST /fhir/Patient with a small Patient (about 250 bytes), 100 bodies in turn",
  connections: 16,
  onFloor: false,
  prepare: async () => {
    const bodies = Array.from({ length: 100 }, (_, n) => JSON.stringify(samplePatient(n)))
    const nextBody = rotation(bodies.length)
    return [{
      method: "POST",
      path: "/fhir/Patient",
      headers: fhirJson,
      setupRequest: (request) => ({ ...request, body: bodies[nextBody()] ?? "" })
    }]
  }
}

export const readById: Workload = {
  name: "read by id",
  description: "GET /fhir/Patient/{id} over the pool of ids, in turn",
  connections: 32,
  onFloor: true,
  goals: { sqlite: { minFloorRatio: 0.35 } },
  prepare: async (target) => {
    const nextId = rotation(target.ids.length)
    return [{
      method: "GET",
      path: "/fhir/Patient",
      headers: { accept: "application/fhir+json" },
      setupRequest: (request) => ({ ...request, path: `/fhir/Patient/${target.ids[nextId()]}` })
    }]
  }
}

/** The creates' bodies are the first 100 sample Patients: from this one on, each identifier is the pool's alone. */
const firstUniqueIdentifier = 100

/**
 * A token search over the pool: each of its Patients from `firstUniqueIdentifier` on by its identifier, one
 * match each. It runs before the updates, which give the pool's Patients other identifiers.
 */
export const searchIdentifier: Workload = {
  name: "search identifier",
  description: `GET /fhir/Patient?identifier=urn:svc:bench|bench-<n>: a token search for each Patient of the pool from the ${firstUniqueIdentifier + 1}st on ` +
    `(the creates repeat the first ${firstUniqueIdentifier} identifiers), in turn, one match each`,
  connections: 8,
  onFloor: false,
  prepare: async (target) => {
    const paths = target.ids.slice(firstUniqueIdentifier).map((_, k) =>
      `/fhir/Patient?identifier=${encodeURIComponent(`${identifierSystem}|bench-${firstUniqueIdentifier + k}`)}`)
    for (const path of [paths[0], paths[paths.length - 1]]) {
      if (path === undefined) throw new Error("search identifier: the pool has no Patient to search for")
      const response = await fetch(`${target.url}${path}`, { headers: { ...target.headers, accept: "application/fhir+json" } })
      const text = await response.text()
      const matches = response.status === 200 ? ((JSON.parse(text) as { entry?: ReadonlyArray<unknown> }).entry ?? []).length : 0
      if (matches !== 1) throw new Error(`GET ${path} answered ${response.status} with ${matches} matches, not 1: ${text.slice(0, 300)}`)
    }
    const nextPath = rotation(paths.length)
    return [{
      method: "GET",
      path: paths[0] ?? "",
      headers: { accept: "application/fhir+json" },
      setupRequest: (request) => ({ ...request, path: paths[nextPath()] ?? "" })
    }]
  }
}

export const update: Workload = {
  name: "update",
  description: "PUT /fhir/Patient/{id} over the pool of ids, in turn, each body differing from the last; no If-Match",
  connections: 16,
  onFloor: false,
  prepare: async (target) => {
    const next = rotation(Number.MAX_SAFE_INTEGER)
    return [{
      method: "PUT",
      path: "/fhir/Patient",
      headers: fhirJson,
      setupRequest: (request) => {
        const n = next()
        const id = target.ids[n % target.ids.length] ?? ""
        return { ...request, path: `/fhir/Patient/${id}`, body: JSON.stringify({ ...samplePatient(n), id }) }
      }
    }]
  }
}

/** Bundles sent in a quick run; a full run sends all 55 (13,792 resources). */
export const quickBundles = 5

/**
 * The Synthea patients as transaction Bundles (`POST /fhir`), each bundle once, by `connections`
 * clients. The warm-up sends the first few bundles once beforehand (the server's JIT, and the
 * catalog of the real packages, warm up on them), so the first measured run is not penalised.
 */
const ingest = (connections: number): DrivenWorkload => ({
  name: "ingest",
  description: `POST /fhir: the Synthea R4 transaction Bundles (one patient each, 100-600 entries, urn:uuid references), each once (${quickBundles} in a quick run), ` +
    `${connections === 1 ? "one client" : `${connections} clients`} sending the next when the last is answered; res/s counts the resources of the 2xx answers`,
  connections,
  onFloor: false,
  // The issue's targets are for 4 clients: 2,000 resources/s on SQLite, 1,000 on Postgres.
  ...(connections === 4 ? { goals: { sqlite: { minResourcesPerSec: 2000 }, postgres: { minResourcesPerSec: 1000 } } } : {}),
  progress: ({ quick }) => `${quick ? quickBundles : "all"} Synthea bundles`,
  warmUp: async (target, { quick, signal }) => {
    await runIngest({ url: target.url, bundles: loadSynthea(quick ? 1 : 5), connections: 1, signal })
  },
  drive: (target, { quick, signal }) =>
    runIngest({ url: target.url, bundles: loadSynthea(quick ? quickBundles : undefined), connections, signal })
})

export const ingestOne = ingest(1)
export const ingestFour = ingest(4)

/** Entries of the large transaction: a full run joins Synthea bundles up to this many, a quick run up to a fifth. */
const largeTransactionEntries = 5_000

/** The Patient read while the large transaction runs: one the ingest before it created. */
const somePatient = async (url: string): Promise<string> => {
  const response = await fetch(`${url}/fhir/Patient?_count=1&_elements=id`, { headers: { accept: "application/fhir+json" } })
  const id = ((await response.json()) as { entry?: Array<{ resource?: { id?: string } }> }).entry?.[0]?.resource?.id
  if (id === undefined) throw new Error("the server holds no Patient to read")
  return id
}

/**
 * GET by id, one client, while one large transaction Bundle (Synthea bundles joined) is ingested: the
 * latencies of the reads show how long a large write holds other requests up (readsDuringIngest.ts).
 */
export const readsDuringIngest: DrivenWorkload = {
  name: "read by id during a large transaction",
  description: `GET /fhir/Patient/{id}, one client, each read sent when the last is answered, while POST /fhir takes one transaction of the Synthea bundles joined ` +
    `(up to ${largeTransactionEntries.toLocaleString("en-US")} entries; a fifth of that in a quick run); req/s and latencies are the reads', res/s the transaction's`,
  connections: 1,
  onFloor: false,
  progress: ({ quick }) => `one transaction of up to ${(quick ? largeTransactionEntries / 5 : largeTransactionEntries).toLocaleString("en-US")} entries`,
  warmUp: async (target, { signal }) => {
    await runIngest({ url: target.url, bundles: loadSynthea(1), connections: 1, signal })
  },
  drive: async (target, { quick, signal }) => {
    const { text, entries } = joinBundles(loadSynthea(), quick ? largeTransactionEntries / 5 : largeTransactionEntries)
    return runReadsDuringIngest({ url: target.url, patientId: await somePatient(target.url), transaction: text, entries, signal })
  }
}

/** The issue's target for the token searches at 8 connections. */
const searchGoal: Goal = { maxMedianMs: 5, maxP99Ms: 25 }

export const searchToken: Workload = {
  name: "search token",
  description: "GET /fhir/Observation?code=http://loinc.org|<code>: five common codes (height, weight, BMI, blood pressure, pain) in turn, first page of 20",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: searchGoal },
  prepare: (target) => prepareSearch(target.url, tokenPaths())
}

export const searchTokenDate: Workload = {
  name: "search token+date",
  description: "GET /fhir/Observation?code=http://loinc.org|<code>&date=ge2016-01-01: the same codes in turn, first page of 20",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: searchGoal },
  prepare: (target) => prepareSearch(target.url, tokenDatePaths())
}

export const searchString: Workload = {
  name: "search string",
  description: "GET /fhir/Patient?family=<prefix>: the first three letters of each family name loaded, in turn",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, await familyPaths(target.url))
}

export const searchPaged: Workload = {
  name: "search paged",
  description: "GET /fhir/Observation?status=final&_count=100&_offset=<n>: every page of all the Observations, in turn (the deepest offsets included)",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, await pagedPaths(target.url), 1)
}

export const searchNextLinks: Workload = {
  name: "search next links",
  description: "GET /fhir/Observation?_count=100 and every page after it as its next link names it, to the last, in turn",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, await nextLinkPaths(target.url), 1)
}

export const searchDeepestPages: Workload = {
  name: "search deepest pages",
  description: "the last 5 pages of GET /fhir/Observation?_count=100 as the next links name them, in turn",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, (await nextLinkPaths(target.url)).slice(-5), 0)
}

export const searchDeepOffset: Workload = {
  name: "search deep _offset",
  description: "GET /fhir/Observation?_count=100&_offset=<n>: the last 5 pages by _offset, in turn",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, await deepOffsetPaths(target.url), 0)
}

export const searchChain: Workload = {
  name: "search chained",
  description: "GET /fhir/Observation?patient.name=<family>: each family name loaded, in turn, first page of 20",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: searchGoal },
  prepare: async (target) => prepareSearch(target.url, await chainPaths(target.url))
}

export const searchHas: Workload = {
  name: "search _has",
  description: "GET /fhir/Patient?_has:Observation:patient:code=http://loinc.org|<code>: the five common codes in turn, first page of 20",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: (target) => prepareSearch(target.url, hasPaths())
}

export const searchInclude: Workload = {
  name: "search _include",
  description: "GET /fhir/Encounter?patient=<id>&_include=Encounter:patient&_revinclude=Observation:encounter: the 20 largest patients in turn, first page of 20 with its includes",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  prepare: async (target) => prepareSearch(target.url, await includePaths(target.url))
}

export const everything: Workload = {
  name: "$everything",
  description: "GET /fhir/Patient/<id>/$everything for the patient with the most Observations, first page",
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: { maxMedianMs: 50 } },
  prepare: async (target) => prepareSearch(target.url, await everythingPaths(target.url), 0)
}

/**
 * In the order they run: reads come after creates so the pool and the table have grown a little, and
 * before the updates, which change the identifiers the pool is searched by.
 * The Synthea workloads run after the others, on their own server: the ingest first, then the
 * searches over what it loaded.
 */
export const workloads: ReadonlyArray<Workload> = [
  create, readById, searchIdentifier, update, ingestOne, ingestFour, searchToken, searchTokenDate, searchString, searchPaged,
  searchNextLinks, searchDeepestPages, searchDeepOffset, searchChain, searchHas, searchInclude, everything,
  // The terminology operations over a ValueSet they write (terminology.ts): nothing the searches read.
  ...terminologyWorkloads,
  // Last: the resources it writes would change what the searches find.
  readsDuringIngest
]

/** Whether a workload runs on the svc with the real R4 packages and the Synthea data. */
export const onSynthea = (workload: Workload): boolean => isDriven(workload) || workload.onSynthea === true

export const describeGoal = (goal: Goal | undefined): string => {
  const parts: Array<string> = []
  if (goal?.minFloorRatio !== undefined) parts.push(`≥ ${Math.round(goal.minFloorRatio * 100)}% of floor`)
  if (goal?.maxMedianMs !== undefined) parts.push(`median ≤ ${goal.maxMedianMs} ms`)
  if (goal?.maxP99Ms !== undefined) parts.push(`p99 ≤ ${goal.maxP99Ms} ms`)
  if (goal?.minResourcesPerSec !== undefined) parts.push(`≥ ${goal.minResourcesPerSec.toLocaleString("en-US")} res/s`)
  return parts.join(", ")
}
