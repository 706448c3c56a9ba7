/**
 * Reads the command line (spec: Command line) against the flag table (flags.ts). Every problem is one
 * sentence that names the flag or argument at fault; the caller prints it and exits with status 2.
 */
import { distance } from "../config/describe.ts"
import { databaseFlagProblem } from "./databaseFlags.ts"
import { type FlagDef, helpFlags, migrateFlags, serveFlags, versionFlags } from "./flags.ts"

export type Command = "svc" | "migrate"

/** The flags given, by name: the values of a flag that takes one (in order), `true` for a switch. */
export type Given = ReadonlyMap<string, ReadonlyArray<string> | true>

export type Parsed =
  | { readonly kind: "help"; readonly command: Command }
  | { readonly kind: "version" }
  | { readonly kind: "run"; readonly command: Command; readonly given: Given }
  | { readonly kind: "problem"; readonly message: string }

export const flagsOf = (command: Command): ReadonlyArray<FlagDef> => (command === "svc" ? serveFlags : migrateFlags)

const problem = (message: string): Parsed => ({ kind: "problem", message })

/** A negative number is a value (`--db-pool -1`), not a flag; it is refused by the setting's own check. */
const looksLikeFlag = (arg: string): boolean => arg.startsWith("-") && arg.length > 1 && !/^-\d/.test(arg)

const closest = (name: string, command: Command): string | undefined => {
  const candidates = flagsOf(command).map((flag) => flag.name).concat(["help", "version"])
  const best = candidates.map((c) => [c, distance(c, name)] as const).filter(([, d]) => d <= 2).sort((a, b) => a[1] - b[1])[0]
  return best?.[0]
}

const unknownFlag = (arg: string, command: Command): string => {
  const name = arg.replace(/^-+/, "").split("=")[0]!
  const other: Command = command === "svc" ? "migrate" : "svc"
  if (arg.startsWith("--") && flagsOf(other).some((flag) => flag.name === name)) {
    return command === "svc"
      ? `--${name} is a flag of svc migrate (svc migrate --${name} ...)`
      : `--${name} is not a flag of svc migrate`
  }
  const suggestion = closest(name, command)
  const hint = suggestion !== undefined ? `; did you mean --${suggestion}?` : `; ${command === "svc" ? "svc" : "svc migrate"} --help lists the flags`
  return `unknown flag ${arg.split("=")[0]}${hint}`
}

const unexpectedArgument = (arg: string, command: Command): string =>
  arg === "migrate" && command === "svc"
    ? "migrate must come first: svc migrate --status | --dry-run [flags]"
    : `unexpected argument '${arg}': ${command === "svc" ? "svc" : "svc migrate"} takes only flags (svc --help lists them)`

/** Reads `args` (the arguments after the program name). */
export const parseArgs = (args: ReadonlyArray<string>): Parsed => {
  const command: Command = args[0] === "migrate" ? "migrate" : "svc"
  const rest = command === "migrate" ? args.slice(1) : args
  if (rest.some((arg) => helpFlags.includes(arg))) return { kind: "help", command }
  if (rest.some((arg) => versionFlags.includes(arg))) return { kind: "version" }
  const databaseProblem = databaseFlagProblem(rest)
  if (databaseProblem !== undefined) return problem(databaseProblem)

  const defs = flagsOf(command)
  const given = new Map<string, Array<string> | true>()
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    if (!looksLikeFlag(arg) || arg === "--") return problem(unexpectedArgument(arg, command))
    const equals = arg.indexOf("=")
    const name = (equals < 0 ? arg : arg.slice(0, equals)).replace(/^--/, "")
    const def = arg.startsWith("--") ? defs.find((flag) => flag.name === name) : undefined
    if (def === undefined) return problem(unknownFlag(arg, command))
    const flag = `--${def.name}`
    if (def.value === undefined) {
      if (equals >= 0) return problem(`${flag} takes no value, got ${arg}`)
      if (given.has(def.name)) return problem(`${flag} is given twice`)
      given.set(def.name, true)
      continue
    }
    let value: string
    if (equals >= 0) {
      value = arg.slice(equals + 1)
    } else {
      const next = rest[i + 1]
      if (next === undefined) return problem(`${flag} needs a value (${def.value})`)
      if (looksLikeFlag(next)) return problem(`${flag} needs a value (${def.value}), but is followed by the flag ${next}`)
      value = next
      i++
    }
    if (value === "") return problem(`${flag} needs a value (${def.value})`)
    const values = given.get(def.name)
    if (values !== undefined && (values === true || !def.repeatable)) return problem(`${flag} is given twice`)
    if (values === undefined) given.set(def.name, [value])
    else values.push(value)
  }
  return { kind: "run", command, given }
}
