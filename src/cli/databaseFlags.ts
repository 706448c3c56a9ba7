/**
 * The database-flag rules of the command line (spec: Command line, rule 3), checked on the raw
 * arguments before parsing, because a parser would read `--sqlite --bind x` as the path `--bind`.
 */

const databaseFlags = ["--sqlite", "--memory", "--postgres"] as const
const takesValue = new Set(["--sqlite", "--postgres"])

export const onlyOneMessage = "pass only one of --sqlite, --memory, or --postgres"

/** The problem with the database flags among `args`, or undefined when they follow the rules. */
export const databaseFlagProblem = (args: ReadonlyArray<string>): string | undefined => {
  let named = 0
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") break
    const flag = databaseFlags.find((name) => arg === name || arg.startsWith(`${name}=`))
    if (flag === undefined) continue
    named++
    if (takesValue.has(flag) && arg === flag) {
      const next = args[i + 1]
      if (next === undefined) return `${flag} needs a value`
      if (next.startsWith("-")) {
        return databaseFlags.some((name) => next === name || next.startsWith(`${name}=`))
          ? onlyOneMessage
          : `${flag} needs a value, but is followed by the flag ${next}`
      }
      i++
    }
  }
  return named > 1 ? onlyOneMessage : undefined
}
