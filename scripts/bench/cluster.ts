/**
 * A primary and a replica on one Postgres database (docs/cluster.md), on this machine's cores: read by id and the
 * token search driven through both processes at once (each workload's connections split between them), against
 * the same workloads on the primary alone, on the same database and pool. What a replica adds is the second
 * process's core: the figures say how much of it the reads get.
 */
import { type Child } from "./children.ts"
import { type LoadOptions, pooled, runLoad, runSlice } from "./load.ts"
import type { Backend } from "./servers.ts"
import type { Target, Workload } from "./suite.ts"

export interface ClusterRun {
  readonly workload: string
  readonly connections: number
  readonly alone: import("./load.ts").Measurement
  readonly both: import("./load.ts").Measurement
}

export interface ClusterOptions {
  readonly backend: Extract<Backend, { kind: "postgres" }>
  readonly primary: Child
  /** Starts the replica (`--role replica --primary-url <primary>`) once the primary's figures are taken. */
  readonly startReplica: () => Promise<Child>
  readonly ids: ReadonlyArray<string>
  readonly workloads: ReadonlyArray<Workload & { readonly prepare: (target: Target) => Promise<Array<import("autocannon").Request>> }>
  readonly load: Omit<LoadOptions, "url" | "requests" | "connections">
  readonly progress: (text: string) => void
}

/** Each workload on the primary alone, then on the primary and the replica at once; the replica is stopped after. */
export const benchPrimaryAndReplica = async (options: ClusterOptions): Promise<Array<ClusterRun>> => {
  const { primary, ids, load, progress } = options
  const target = (child: Child): Target => ({ server: child.name, backend: "postgres", url: child.url, ids })
  const alone = new Map<string, import("./load.ts").Measurement>()
  for (const workload of options.workloads) {
    progress(`svc primary alone, postgres: ${workload.name}, ${workload.connections} connections`)
    const requests = await workload.prepare(target(primary))
    alone.set(workload.name, await runLoad({ ...load, url: primary.url, requests, connections: workload.connections }))
  }
  progress("svc replica, postgres: starting beside the primary")
  const replica = await options.startReplica()
  try {
    const runs: Array<ClusterRun> = []
    for (const workload of options.workloads) {
      progress(`svc primary and replica, postgres: ${workload.name}, ${workload.connections} connections split between them`)
      const half = Math.max(1, Math.floor(workload.connections / 2))
      const sides = [
        { url: primary.url, requests: await workload.prepare(target(primary)), connections: half },
        { url: replica.url, requests: await workload.prepare(target(replica)), connections: workload.connections - half }
      ]
      // Warmed up together, then measured together: the two processes share the machine as they would in use.
      if (load.warmupSeconds > 0) await Promise.all(sides.map((side) => runSlice({ ...load, ...side, seconds: load.warmupSeconds })))
      const slices = await Promise.all(sides.map((side) => runSlice({ ...load, ...side })))
      const measured = pooled(slices)
      // At once, not in turn: the rate is the two sides' rates added.
      const both = { ...measured, reqPerSec: slices.reduce((sum, slice) => sum + slice.measurement.reqPerSec, 0), seconds: load.seconds }
      runs.push({ workload: workload.name, connections: workload.connections, alone: alone.get(workload.name)!, both })
    }
    return runs
  } finally {
    await replica.stop()
  }
}
