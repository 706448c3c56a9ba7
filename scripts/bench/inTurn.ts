/**
 * Two servers loaded in turn with one workload, to price what one of them does more than the other (a bearer
 * token, governance) as a share of the other's rate. Measured a minute apart, two rates on this kind of machine
 * (a shared 2-core virtual machine, the load generator on the same cores) move by 15% either way as the
 * machine's speed drifts, which hides a cost of a few per cent. Both servers are up at once and only one is
 * loaded at a time, for short slices in the order ABBA ABBA ..., so that each meets the same drift: a change of
 * speed that is linear over a pair of rounds falls on both alike. The share is the candidate's requests over
 * the reference's, both loaded for the same time; the rounds' own shares are kept to show the spread.
 */
import type autocannon from "autocannon"
import { type Measurement, pooled, runLoad, runSlice, type Slice } from "./load.ts"

export interface InTurnSide {
  readonly url: string
  readonly requests: Array<autocannon.Request>
  readonly headers?: Readonly<Record<string, string>> | undefined
}

export interface InTurnOptions {
  readonly connections: number
  /** Each side's warm-up, before the first round (seconds). */
  readonly warmupSeconds: number
  /** Rounds of one slice on each side. */
  readonly rounds: number
  readonly sliceSeconds: number
  readonly signal: AbortSignal
}

export interface InTurn {
  readonly reference: Measurement
  readonly candidate: Measurement
  /** The candidate's 2xx responses per second over the reference's, over all rounds. */
  readonly share: number
  /** Each round's share, in order. */
  readonly roundShares: ReadonlyArray<number>
}

/** Loads `reference` and `candidate` in turn (ABBA ...) and pools each side's slices. */
export const measureInTurn = async (reference: InTurnSide, candidate: InTurnSide, options: InTurnOptions): Promise<InTurn> => {
  const run = (side: InTurnSide, seconds: number, warmupSeconds: number) => ({
    url: side.url,
    requests: side.requests,
    headers: side.headers,
    connections: options.connections,
    warmupSeconds,
    seconds,
    signal: options.signal
  })
  if (options.warmupSeconds > 0) {
    // runLoad's measured part is the warm-up here: both sides reach their steady state before any round.
    await runLoad(run(reference, options.warmupSeconds, 0))
    await runLoad(run(candidate, options.warmupSeconds, 0))
  }
  const referenceSlices: Array<Slice> = []
  const candidateSlices: Array<Slice> = []
  const roundShares: Array<number> = []
  for (let round = 0; round < options.rounds; round++) {
    const measure = (side: InTurnSide) => runSlice(run(side, options.sliceSeconds, 0))
    const [ref, cand] = round % 2 === 0
      ? [await measure(reference), await measure(candidate)]
      : await measure(candidate).then(async (cand) => [await measure(reference), cand] as const)
    referenceSlices.push(ref)
    candidateSlices.push(cand)
    roundShares.push(ref.measurement.reqPerSec > 0 ? cand.measurement.reqPerSec / ref.measurement.reqPerSec : Number.NaN)
  }
  const referenceMeasurement = pooled(referenceSlices)
  const candidateMeasurement = pooled(candidateSlices)
  return {
    reference: referenceMeasurement,
    candidate: candidateMeasurement,
    share: referenceMeasurement.reqPerSec > 0 ? candidateMeasurement.reqPerSec / referenceMeasurement.reqPerSec : Number.NaN,
    roundShares
  }
}
