/**
 * The workloads of `npm run bench`. A workload is a small object: its name, how many connections
 * drive it, whether the floor runs it too, its target, and `prepare`, which readies the server
 * under test and returns the requests autocannon cycles through. To add one (search, Synthea
 * ingest, ...), write it here and append it to `workloads`.
 */
import type autocannon from "autocannon"
import { samplePatient } from "./patients.ts"

/** The server a workload runs against, with the pool of Patient ids created on it beforehand. */
export interface Target {
  /** `svc` or `floor` */
  readonly server: string
  /** `sqlite`, `postgres`, or `better-sqlite3` for the floor */
  readonly backend: string
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly ids: ReadonlyArray<string>
}

/** What a workload should reach; every field is optional so later workloads can state their own. */
export interface Goal {
  /** req/s of this workload over req/s of the floor's read by id */
  readonly minFloorRatio?: number
  readonly maxP99Ms?: number
}

export interface Workload {
  readonly name: string
  readonly description: string
  readonly connections: number
  /** Whether the floor server runs it too (the floor only answers reads by id). */
  readonly onFloor: boolean
  readonly goal?: Goal
  readonly prepare: (target: Target) => Promise<Array<autocannon.Request>>
}

const fhirJson = { "content-type": "application/fhir+json", accept: "application/fhir+json" }

/** Cycles through `count` values shared by every connection: each request takes the next one. */
const rotation = (count: number): (() => number) => {
  let next = 0
  return () => {
    const value = next
    next = (next + 1) % count
    return value
  }
}

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
  goal: { minFloorRatio: 0.35 },
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

/** In the order they run: reads come after creates so the pool and the table have grown a little. */
export const workloads: ReadonlyArray<Workload> = [create, readById, update]

export const describeGoal = (goal: Goal | undefined): string => {
  const parts: Array<string> = []
  if (goal?.minFloorRatio !== undefined) parts.push(`≥ ${Math.round(goal.minFloorRatio * 100)}% of floor`)
  if (goal?.maxP99Ms !== undefined) parts.push(`p99 ≤ ${goal.maxP99Ms} ms`)
  return parts.join(", ")
}
