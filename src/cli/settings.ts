/** Settings named on the command line, as a nested object shaped like the configuration file. */
export type FlagSettings = { [key: string]: unknown }

/** Sets `path` (dotted) in `target`, creating the tables on the way. */
export const setIn = (target: FlagSettings, path: string, value: unknown): void => {
  const keys = path.split(".")
  let table: FlagSettings = target
  for (const key of keys.slice(0, -1)) {
    const next = table[key]
    if (typeof next === "object" && next !== null && !Array.isArray(next)) {
      table = next as FlagSettings
    } else {
      const created: FlagSettings = {}
      table[key] = created
      table = created
    }
  }
  table[keys[keys.length - 1]!] = value
}
