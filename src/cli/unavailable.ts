/**
 * Flags and settings whose capability this build does not have yet. Each is parsed, then refused
 * at start-up with a message naming it, never silently ignored. A row leaves this table when its
 * capability lands.
 */
import { Effect } from "effect"
import type { AppConfig } from "../config/AppConfig.ts"
import { Unavailable } from "./errors.ts"

interface Row {
  readonly flags: ReadonlyArray<string>
  readonly setting: string
  readonly what: string
  /** Whether the configuration (file or environment) switches the capability on. */
  readonly on: (config: AppConfig) => boolean
}

const rows: ReadonlyArray<Row> = [
  { flags: ["--trace-engine"], setting: "features.trace_engine", what: "the trace engine", on: (c) => c.features.trace_engine },
  { flags: ["--sdc-archiver"], setting: "features.sdc_archiver", what: "the SDC archiver", on: (c) => c.features.sdc_archiver }
]

/** The flags refused at start-up because their capability is not built yet. */
export const unavailableFlags: ReadonlyArray<string> = rows.flatMap((row) => row.flags)

/** Fails with one message listing every flag and setting that names a capability not built yet. */
export const refuseUnavailable = (config: AppConfig, namedFlags: ReadonlyArray<string>): Effect.Effect<void, Unavailable> => {
  const problems: Array<string> = []
  for (const row of rows) {
    const flags = row.flags.filter((flag) => namedFlags.includes(flag))
    const relevant = flags
    if (relevant.length > 0) problems.push(`${relevant.join(", ")}: ${row.what} is not available in this build yet`)
    else if (row.on(config)) problems.push(`${row.setting}: ${row.what} is not available in this build yet`)
  }
  return problems.length === 0 ? Effect.void : Effect.fail(new Unavailable({ message: problems.join("\n") }))
}
