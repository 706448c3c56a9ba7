/**
 * The GraphQL workload (docs/graphql.md, docs/performance.md "GraphQL"): a patient with its Observations and their
 * codes in one `POST /graphql`, against the REST calls an app makes for the same data, one after the other
 * (`GET /fhir/Patient/<id>`, then `GET /fhir/Observation?subject=Patient/<id>&_count=100`). One iteration is the
 * one POST, or the two GETs, each answer read whole and parsed as JSON; its time is what the table's median and p99
 * are of.
 *
 * A svc with the real R4 packages (the schema is built from their StructureDefinitions; the tests' stand-ins hold no
 * data types), on a fresh copy of the R4 template, takes patients each with the same number of Observations (a
 * transaction per patient). Before anything is timed, the GraphQL answer and the REST answers for a few patients must
 * hold the same patient and the same Observations (ids and codes), or the workload fails. Then the two sides are
 * loaded in turn on the same server (ABBA ..., as inTurn.ts does for two servers), so that the machine's drift
 * falls on both alike; the patients are asked for in the same order on both sides. The REST pair on the same server
 * is the comparison: the floor server answers reads by id only, and what is asked here is what GraphQL costs
 * against what it replaces. `npm run bench` runs it on each backend (run.ts), `npm run bench:graphql` alone
 * (graphqlRun.ts).
 */
import { randomUUID } from "node:crypto"
import { Agent, request } from "node:http"
import { interrupted, onCleanup } from "./cleanup.ts"
import type { Child } from "./children.ts"
import { watchMemory } from "./memory.ts"
import type { Row } from "./report.ts"
import { samplePatient } from "./patients.ts"
import { rotation } from "./rotation.ts"
import { type Backend, type Packages, startSvc } from "./servers.ts"

export interface GraphQLSettings {
  readonly patients: number
  readonly observationsPerPatient: number
  /** Clients at once on the side being loaded, each sending its next iteration when the last is done. */
  readonly clients: number
  /** Each side's warm-up before the first round, seconds. */
  readonly warmupSeconds: number
  /** Rounds of one slice on each side. */
  readonly rounds: number
  readonly sliceSeconds: number
}

export const graphqlSettings = (quick: boolean): GraphQLSettings => ({
  patients: 100,
  observationsPerPatient: 20,
  clients: 1,
  warmupSeconds: quick ? 1 : 2,
  rounds: quick ? 4 : 8,
  sliceSeconds: quick ? 0.5 : 1
})

/** The `_count` of the Observations' search, on both sides: more than a patient has, so one page holds them all. */
const observationCount = 100

const observationFields = "id code { coding { system code display } } valueQuantity { value unit } effectiveDateTime"

/**
 * The GraphQL side's query for one patient, and where its answer holds the patient and the Observations: the
 * patient with its Observations as a reverse reference (`ObservationList(_reference: subject)`), as an app asks.
 */
export const graphqlForm = {
  query: (id: string): string =>
    `{ Patient(id: "${id}") { id name { family given } birthDate ` +
    `ObservationList(_reference: subject, _count: ${observationCount}) { ${observationFields} } } }`,
  answer: (data: Record<string, unknown>): { readonly patient: unknown; readonly observations: unknown } => {
    const { ObservationList: observations, ...patient } = data["Patient"] as Record<string, unknown>
    return { patient, observations }
  }
}

/** The REST side's paths for one patient, in the order an app asks for them. */
export const restPaths = (id: string): readonly [string, string] =>
  [`/fhir/Patient/${id}`, `/fhir/Observation?subject=${encodeURIComponent(`Patient/${id}`)}&_count=${observationCount}`]

/** The workload as the bench's table and JSON name and describe it: one row per side. */
export const graphqlWorkloads = (settings: GraphQLSettings) => {
  const common = `a patient and its ${settings.observationsPerPatient} Observations (${settings.patients} patients in turn), ${settings.clients} client(s), ` +
    `each iteration sent when the last is done and its answers parsed as JSON; req/s are iterations/s, the latencies an iteration's; ` +
    `loaded in turn with the other side on the same svc (${settings.rounds} rounds of ${settings.sliceSeconds} s each after ${settings.warmupSeconds} s)`
  return {
    graphql: {
      name: "GraphQL patient + observations",
      description: `POST /graphql: ${graphqlForm.query("<id>")}; ${common}`,
      connections: settings.clients
    },
    rest: {
      name: "REST patient + observations",
      description: `GET ${restPaths("<id>").join(", then GET ")}; ${common}`,
      connections: settings.clients
    }
  }
}

/** Lab codes the Observations take in turn: LOINC, with their UCUM units. */
const labs: ReadonlyArray<readonly [code: string, display: string, unit: string, low: number]> = [
  ["2339-0", "Glucose [Mass/volume] in Blood", "mg/dL", 70],
  ["718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", 12],
  ["2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", 0.6],
  ["2951-2", "Sodium [Moles/volume] in Serum or Plasma", "mmol/L", 135],
  ["2823-3", "Potassium [Moles/volume] in Serum or Plasma", "mmol/L", 3.5],
  ["2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", "mg/dL", 150],
  ["6690-2", "Leukocytes [#/volume] in Blood by Automated count", "10*3/uL", 4],
  ["777-3", "Platelets [#/volume] in Blood by Automated count", "10*3/uL", 150]
]

/** The k-th Observation of a patient whose Patient entry is `patientUrl`. */
const sampleObservation = (patientUrl: string, k: number): Record<string, unknown> => {
  const [code, display, unit, low] = labs[k % labs.length]!
  return {
    resourceType: "Observation",
    status: "final",
    category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "laboratory", display: "Laboratory" }] }],
    code: { coding: [{ system: "http://loinc.org", code, display }], text: display },
    subject: { reference: patientUrl },
    effectiveDateTime: `20${String(10 + (k % 15)).padStart(2, "0")}-0${1 + (k % 9)}-1${k % 10}T0${k % 10}:30:00Z`,
    valueQuantity: { value: Math.round((low + (k % 7) * low * 0.05) * 100) / 100, unit, system: "http://unitsofmeasure.org", code: unit }
  }
}

const fhirJson = { "content-type": "application/fhir+json", accept: "application/fhir+json" }

/**
 * Creates `settings.patients` sample Patients (patients.ts), each with `observationsPerPatient` Observations that
 * reference it, one transaction per patient (`POST /fhir`, `urn:uuid:` references); resolves with the Patients' ids.
 */
export const seedPatients = async (url: string, settings: GraphQLSettings): Promise<Array<string>> => {
  const ids: Array<string> = []
  for (let n = 0; n < settings.patients; n++) {
    const patientUrl = `urn:uuid:${randomUUID()}`
    const entry = [
      { fullUrl: patientUrl, resource: samplePatient(n), request: { method: "POST", url: "Patient" } },
      ...Array.from({ length: settings.observationsPerPatient }, (_, k) =>
        ({ fullUrl: `urn:uuid:${randomUUID()}`, resource: sampleObservation(patientUrl, n + k), request: { method: "POST", url: "Observation" } }))
    ]
    const response = await fetch(`${url}/fhir`, {
      method: "POST",
      headers: fhirJson,
      body: JSON.stringify({ resourceType: "Bundle", type: "transaction", entry }),
      signal: interrupted.signal
    })
    const text = await response.text()
    const location = response.status === 200 ? (JSON.parse(text) as { entry?: ReadonlyArray<{ response?: { location?: string } }> }).entry?.[0]?.response?.location : undefined
    const id = /^(?:.*\/)?Patient\/([^/]+)/.exec(location ?? "")?.[1]
    if (id === undefined) throw new Error(`creating patient ${n} and its Observations: POST /fhir answered ${response.status}: ${text.slice(0, 300)}`)
    ids.push(id)
  }
  return ids
}

interface Answer {
  readonly status: number
  readonly text: string
  readonly bytes: number
}

/** One HTTP exchange over `agent`, the answer read whole. */
const exchange = (agent: Agent, base: URL, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const sent = request({ agent, host: base.hostname, port: base.port, method, path, headers, signal: interrupted.signal }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const body = Buffer.concat(chunks)
        resolve({ status: response.statusCode ?? 0, text: body.toString("utf8"), bytes: body.length })
      })
      response.on("error", reject)
    })
    sent.on("error", reject)
    sent.end(body)
  })

/** What one iteration of a side gives: the parsed answers, or why the iteration failed. */
type Iteration = (id: string) => Promise<{ readonly parsed: ReadonlyArray<unknown>; readonly bytes: number } | string>

/** The two sides of the workload on the server at `url`, each over keep-alive connections of its own. */
export const sides = (url: string, clients: number): { readonly graphql: Iteration; readonly rest: Iteration; readonly close: () => void } => {
  const base = new URL(url)
  const graphqlAgent = new Agent({ keepAlive: true, maxSockets: clients })
  const restAgent = new Agent({ keepAlive: true, maxSockets: clients })
  const graphql: Iteration = async (id) => {
    const answer = await exchange(graphqlAgent, base, "POST", "/graphql", { "content-type": "application/json", accept: "application/json" }, JSON.stringify({ query: graphqlForm.query(id) }))
    if (answer.status !== 200) return `POST /graphql answered ${answer.status}: ${answer.text.slice(0, 300)}`
    const parsed = JSON.parse(answer.text) as { errors?: ReadonlyArray<unknown> }
    if (parsed.errors !== undefined) return `POST /graphql answered errors: ${answer.text.slice(0, 300)}`
    return { parsed: [parsed], bytes: answer.bytes }
  }
  const rest: Iteration = async (id) => {
    const parsed: Array<unknown> = []
    let bytes = 0
    for (const path of restPaths(id)) {
      const answer = await exchange(restAgent, base, "GET", path, { accept: "application/fhir+json" })
      if (answer.status !== 200) return `GET ${path} answered ${answer.status}: ${answer.text.slice(0, 300)}`
      parsed.push(JSON.parse(answer.text))
      bytes += answer.bytes
    }
    return { parsed, bytes }
  }
  return { graphql, rest, close: () => [graphqlAgent, restAgent].forEach((agent) => agent.destroy()) }
}

interface Seen {
  readonly patient: string | undefined
  /** `id code|code|...`, by id. */
  readonly observations: ReadonlyArray<string>
}

type Coded = { readonly id?: string; readonly code?: { readonly coding?: ReadonlyArray<{ readonly system?: string; readonly code?: string; readonly display?: string }> } }

const seenObservations = (list: ReadonlyArray<Coded>): ReadonlyArray<string> =>
  list.map((o) => `${o.id} ${(o.code?.coding ?? []).map((c) => `${c.system}|${c.code}|${c.display}`).join(",")}`).sort()

/** What the GraphQL answer and the REST answers hold of the patient and its Observations. */
const seenOf = {
  graphql: (parsed: ReadonlyArray<unknown>): Seen => {
    const { patient, observations } = graphqlForm.answer((parsed[0] as { data?: Record<string, unknown> }).data ?? {})
    return { patient: (patient as { id?: string } | null)?.id, observations: seenObservations((observations ?? []) as ReadonlyArray<Coded>) }
  },
  rest: (parsed: ReadonlyArray<unknown>): Seen => {
    const bundle = parsed[1] as { entry?: ReadonlyArray<{ resource: Coded }> }
    return { patient: (parsed[0] as { id?: string }).id, observations: seenObservations((bundle.entry ?? []).map((e) => e.resource)) }
  }
}

/**
 * Fails unless, for each of `ids`, the GraphQL answer holds the same patient and the same Observations (ids and
 * codes) as the REST answers, and as many as were created; resolves with each side's bytes for the first patient.
 */
export const checkSameAnswers = async (url: string, ids: ReadonlyArray<string>, observationsPerPatient: number): Promise<{ readonly graphqlBytes: number; readonly restBytes: number }> => {
  const both = sides(url, 1)
  try {
    const bytes: Array<{ readonly graphqlBytes: number; readonly restBytes: number }> = []
    for (const id of ids) {
      const [graphql, rest] = [await both.graphql(id), await both.rest(id)]
      if (typeof graphql === "string") throw new Error(`GraphQL for Patient/${id}: ${graphql}`)
      if (typeof rest === "string") throw new Error(`REST for Patient/${id}: ${rest}`)
      const [g, r] = [seenOf.graphql(graphql.parsed), seenOf.rest(rest.parsed)]
      const problems = [
        g.patient === id && r.patient === id ? "" : `the patient is ${String(g.patient)} by GraphQL, ${String(r.patient)} by REST`,
        r.observations.length === observationsPerPatient ? "" : `REST gives ${r.observations.length} Observations, not the ${observationsPerPatient} created`,
        JSON.stringify(g.observations) === JSON.stringify(r.observations) ? "" :
          `the Observations differ: GraphQL ${g.observations.length} (${g.observations.slice(0, 2).join("; ")}...), REST ${r.observations.length} (${r.observations.slice(0, 2).join("; ")}...)`
      ].filter((problem) => problem !== "")
      if (problems.length > 0) throw new Error(`GraphQL and REST disagree on Patient/${id}: ${problems.join("; ")}`)
      bytes.push({ graphqlBytes: graphql.bytes, restBytes: rest.bytes })
    }
    return bytes[0] ?? { graphqlBytes: 0, restBytes: 0 }
  } finally {
    both.close()
  }
}

export interface SideFigures {
  readonly iterations: number
  readonly iterationsPerSec: number
  readonly medianMs: number
  readonly p99Ms: number
  /** Iterations with an answer that was not 200, or GraphQL errors; not in the latencies. */
  readonly failed: number
  readonly seconds: number
  /** Bytes of the answers of one iteration (the first patient's). */
  readonly bytes: number
}

interface Slice {
  readonly latencies: Array<number>
  readonly failed: number
  readonly seconds: number
  readonly firstFailure: string | undefined
}

/** `clients` loops of `iterate` over the patients in turn (`next`) for `seconds`. */
const runSlice = async (iterate: Iteration, ids: ReadonlyArray<string>, next: () => number, clients: number, seconds: number): Promise<Slice> => {
  const latencies: Array<number> = []
  let failed = 0
  let firstFailure: string | undefined
  const started = performance.now()
  const until = started + seconds * 1000
  const client = async () => {
    while (performance.now() < until) {
      interrupted.signal.throwIfAborted()
      const id = ids[next()] ?? ""
      const from = performance.now()
      const result = await iterate(id)
      const ms = performance.now() - from
      if (typeof result === "string") {
        failed++
        firstFailure ??= result
      } else latencies.push(ms)
    }
  }
  await Promise.all(Array.from({ length: clients }, client))
  return { latencies, failed, seconds: (performance.now() - started) / 1000, firstFailure }
}

const percentile = (sorted: Float64Array, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

const pooled = (slices: ReadonlyArray<Slice>, bytes: number): SideFigures => {
  const all = Float64Array.from(slices.flatMap((slice) => slice.latencies)).sort()
  const seconds = slices.reduce((sum, slice) => sum + slice.seconds, 0)
  return {
    iterations: all.length, iterationsPerSec: seconds > 0 ? all.length / seconds : 0, medianMs: percentile(all, 0.5), p99Ms: percentile(all, 0.99),
    failed: slices.reduce((sum, slice) => sum + slice.failed, 0), seconds, bytes
  }
}

const medianOf = (slice: Slice): number => percentile(Float64Array.from(slice.latencies).sort(), 0.5)

export interface InTurnFigures {
  readonly graphql: SideFigures
  readonly rest: SideFigures
  /** Each round's GraphQL median over its REST median, in order. */
  readonly roundMedianRatios: ReadonlyArray<number>
  /** The first failed iteration's reason, when one failed. */
  readonly firstFailure: string | undefined
}

/** The two sides loaded in turn (ABBA ...) on the server at `url`, after a warm-up of each. */
export const measureSides = async (url: string, ids: ReadonlyArray<string>, settings: GraphQLSettings, bytes: { readonly graphqlBytes: number; readonly restBytes: number }): Promise<InTurnFigures> => {
  const both = sides(url, settings.clients)
  // Each side asks for the patients in the same order, from the first.
  const nextGraphQL = rotation(ids.length)
  const nextRest = rotation(ids.length)
  const graphql = (seconds: number) => runSlice(both.graphql, ids, nextGraphQL, settings.clients, seconds)
  const rest = (seconds: number) => runSlice(both.rest, ids, nextRest, settings.clients, seconds)
  try {
    await rest(settings.warmupSeconds)
    await graphql(settings.warmupSeconds)
    const restSlices: Array<Slice> = []
    const graphqlSlices: Array<Slice> = []
    const roundMedianRatios: Array<number> = []
    for (let round = 0; round < settings.rounds; round++) {
      const [r, g] = round % 2 === 0
        ? [await rest(settings.sliceSeconds), await graphql(settings.sliceSeconds)]
        : await graphql(settings.sliceSeconds).then(async (g) => [await rest(settings.sliceSeconds), g] as const)
      restSlices.push(r)
      graphqlSlices.push(g)
      roundMedianRatios.push(medianOf(g) / medianOf(r))
    }
    return {
      graphql: pooled(graphqlSlices, bytes.graphqlBytes),
      rest: pooled(restSlices, bytes.restBytes),
      roundMedianRatios,
      firstFailure: [...graphqlSlices, ...restSlices].find((slice) => slice.firstFailure !== undefined)?.firstFailure
    }
  } finally {
    both.close()
  }
}

export interface GraphQLFigures extends InTurnFigures {
  readonly backend: string
  readonly patients: number
  readonly observations: number
  /** Creating the patients and their Observations, seconds. */
  readonly seedSeconds: number
  /** GraphQL's median over REST's, and the same of the p99s. */
  readonly medianRatio: number
  readonly p99Ratio: number
  /** The server's peak resident memory while the two sides were loaded, MB. */
  readonly peakRssMb: number | undefined
}

/** A started svc with the real R4 packages and its patients, checked: what the timed part and a profile start from. */
export interface Readied {
  readonly child: Child
  readonly ids: ReadonlyArray<string>
  readonly seedSeconds: number
  readonly bytes: { readonly graphqlBytes: number; readonly restBytes: number }
  readonly stop: () => Promise<void>
}

/** Starts svc on `backend` (a fresh copy of the R4 template), creates the patients and checks both sides' answers. */
export const readyServer = async (
  backend: Backend,
  workDir: string,
  packages: Packages,
  settings: GraphQLSettings,
  progress: (message: string) => void,
  nodeArgs: ReadonlyArray<string> = []
): Promise<Readied> => {
  progress(`svc ${backend.kind} with the real R4 packages, for GraphQL: starting`)
  const child = await startSvc(backend, workDir, packages, { name: `svc-${backend.kind}-r4-graphql`, nodeArgs, ...(nodeArgs.length > 0 ? { killAfterMs: 120_000 } : {}) })
  const stop = onCleanup(`stopping the svc ${backend.kind} of GraphQL`, child.stop)
  try {
    progress(`${backend.kind}: creating ${settings.patients} patients with ${settings.observationsPerPatient} Observations each`)
    const seeding = performance.now()
    const ids = await seedPatients(child.url, settings)
    const seedSeconds = (performance.now() - seeding) / 1000
    const bytes = await checkSameAnswers(child.url, [ids[0]!, ids[Math.floor(ids.length / 2)]!, ids[ids.length - 1]!], settings.observationsPerPatient)
    return { child, ids, seedSeconds, bytes, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/** The workload on `backend`: svc started and readied, both sides checked and loaded in turn, svc stopped. */
export const benchGraphQL = async (backend: Backend, workDir: string, packages: Packages, settings: GraphQLSettings, progress: (message: string) => void): Promise<GraphQLFigures> => {
  const readied = await readyServer(backend, workDir, packages, settings, progress)
  const memory = watchMemory(readied.child.pid)
  try {
    progress(`${backend.kind}: GraphQL against REST in turn, ${settings.clients} client(s), ${settings.warmupSeconds} s warm-up each, ` +
      `then ${settings.rounds} rounds of ${settings.sliceSeconds} s on each`)
    memory.startWindow()
    const figures = await measureSides(readied.child.url, readied.ids, settings, readied.bytes)
    return {
      backend: backend.kind, patients: readied.ids.length, observations: readied.ids.length * settings.observationsPerPatient, seedSeconds: readied.seedSeconds,
      ...figures, medianRatio: figures.graphql.medianMs / figures.rest.medianMs, p99Ratio: figures.graphql.p99Ms / figures.rest.p99Ms, peakRssMb: memory.windowPeakMb()
    }
  } finally {
    memory.stop()
    await readied.stop()
  }
}

/** One side alone for `seconds`, the patients in turn from the first (a profile's window). */
export const loadAlone = async (url: string, ids: ReadonlyArray<string>, side: "graphql" | "rest", clients: number, seconds: number): Promise<SideFigures> => {
  const both = sides(url, clients)
  try {
    return pooled([await runSlice(both[side], ids, rotation(ids.length), clients, seconds)], 0)
  } finally {
    both.close()
  }
}

/** The table's rows of one backend: one per side, iterations as its requests. */
export const graphqlRows = (figures: GraphQLFigures, settings: GraphQLSettings): Array<Omit<Row, "floorRatio" | "met">> => {
  const names = graphqlWorkloads(settings)
  return ([[names.graphql.name, figures.graphql], [names.rest.name, figures.rest]] as const).map(([workload, side]) => ({
    workload, server: "svc", backend: figures.backend, connections: settings.clients, reqPerSec: side.iterationsPerSec, medianMs: side.medianMs,
    p99Ms: side.p99Ms, ok: side.iterations, non2xx: side.failed, errors: 0, seconds: side.seconds, statusCodes: {}, peakRssMb: figures.peakRssMb, target: ""
  }))
}

/** One line per backend, as printed under the bench's table. */
export const describeGraphQL = (f: GraphQLFigures): string => {
  const ratios = f.roundMedianRatios.filter((ratio) => Number.isFinite(ratio))
  return `${f.backend}: median ${f.graphql.medianMs.toFixed(2)} against ${f.rest.medianMs.toFixed(2)} ms (${f.medianRatio.toFixed(2)}x), ` +
    `p99 ${f.graphql.p99Ms.toFixed(2)} against ${f.rest.p99Ms.toFixed(2)} ms (${f.p99Ratio.toFixed(2)}x), ` +
    `${f.graphql.iterationsPerSec.toFixed(0)} against ${f.rest.iterationsPerSec.toFixed(0)} iterations/s, rounds' median ratios ` +
    `${Math.min(...ratios).toFixed(2)}x to ${Math.max(...ratios).toFixed(2)}x; ${(f.graphql.bytes / 1024).toFixed(1)} KB against ${(f.rest.bytes / 1024).toFixed(1)} KB of JSON` +
    (f.graphql.failed + f.rest.failed > 0 ? `; FAILED iterations: ${f.graphql.failed} GraphQL, ${f.rest.failed} REST (${f.firstFailure ?? "?"})` : "")
}
