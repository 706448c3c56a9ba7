/**
 * `svc --help` and `svc migrate --help`, rendered from the flag table (flags.ts): each flag once, with its
 * meaning, its default and the setting it overrides. Bold headings only on a terminal, and never when
 * `NO_COLOR` is set (https://no-color.org) or the terminal is `dumb`, so a pager or a file gets plain text.
 */
import { Schema } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { buildVersion } from "../version.ts"
import type { Command } from "./args.ts"
import { type FlagDef, migrateFlags, serveFlags } from "./flags.ts"
import { unavailableFlags } from "./unavailable.ts"

const width = 80
const indent = "      "

/** Whether help written to a stream may use colour. */
export const useColor = (isTTY: boolean | undefined, env: Record<string, string | undefined>): boolean =>
  isTTY === true && (env["NO_COLOR"] ?? "") === "" && env["TERM"] !== "dumb"

const wrap = (text: string, prefix: string): ReadonlyArray<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(" ")) {
    if (line !== "" && prefix.length + line.length + 1 + word.length > width) {
      lines.push(prefix + line)
      line = word
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  if (line !== "") lines.push(prefix + line)
  return lines
}

/** The settings' defaults, as the configuration reads an empty file. */
const defaults: unknown = Schema.decodeUnknownSync(AppConfig)({})

const settingDefault = (setting: string): string | undefined => {
  let value: unknown = defaults
  for (const key of setting.split(".")) {
    value = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined
  }
  return typeof value === "string" || typeof value === "number" ? String(value) : undefined
}

const describeFlag = (flag: FlagDef, bold: (text: string) => string): ReadonlyArray<string> => {
  const head = `  ${bold(`--${flag.name}`)}${flag.value === undefined ? "" : ` <${flag.value}>`}${flag.repeatable ? " ..." : ""}`
  const fallback = flag.defaultText ?? (flag.setting === undefined || flag.value === undefined ? undefined : settingDefault(flag.setting))
  const notes = [
    flag.meaning,
    ...(fallback === undefined ? [] : [`Default: ${fallback}.`]),
    ...(flag.setting === undefined || flag.name === "memory" ? [] : [`Setting: ${flag.setting}.`]),
    ...(unavailableFlags.includes(`--${flag.name}`) ? ["Not in this build yet: refused at start-up."] : [])
  ]
  return [head, ...wrap(notes.join(" "), indent)]
}

const generalFlags = (bold: (text: string) => string): ReadonlyArray<string> => [
  `  ${bold("--help")}, ${bold("-h")}`,
  `${indent}Print this help and exit.`,
  `  ${bold("--version")}, ${bold("-V")}`,
  `${indent}Print the version and exit.`
]

const serveHelp = (bold: (text: string) => string): ReadonlyArray<string> => [
  `svc ${buildVersion}: a FHIR R4 server on SQLite or Postgres.`,
  "",
  bold("Usage"),
  "  svc [flags]                        start the server",
  "  svc migrate --status | --dry-run   report database migrations; changes nothing",
  "  svc --version                      print the version",
  "  svc --help                         this help (svc migrate --help: its own)",
  "",
  bold("Flags"),
  ...serveFlags.flatMap((flag) => describeFlag(flag, bold)),
  ...generalFlags(bold),
  "",
  ...wrap(
    "Give at most one of --sqlite, --memory and --postgres. A flag overrides its setting in the configuration file and in the SVC_* environment (docs/configuration.md). Exit status: 0 stopped by SIGTERM or SIGINT, 1 start-up failed, 2 wrong arguments.",
    ""
  )
]

const migrateHelp = (bold: (text: string) => string): ReadonlyArray<string> => [
  ...wrap(`svc migrate: report what the database records and which migrations svc ${buildVersion} would apply. Nothing is changed, and a SQLite file that does not exist is not created.`, ""),
  "",
  bold("Usage"),
  "  svc migrate --status | --dry-run [--config <path>]",
  "              [--sqlite <path> | --postgres <url>]",
  "",
  bold("Flags"),
  ...migrateFlags.flatMap((flag) => describeFlag(flag, bold)),
  ...generalFlags(bold),
  "",
  ...wrap(
    "Exit status: 0 this build would start on the database, 1 it would refuse to start, 2 the database could not be read or the arguments are wrong.",
    ""
  )
]

/** The help of `command`, ending in a newline. */
export const helpText = (command: Command, color: boolean): string => {
  const bold = color ? (text: string) => `\u001b[1m${text}\u001b[22m` : (text: string) => text
  return `${(command === "svc" ? serveHelp(bold) : migrateHelp(bold)).join("\n")}\n`
}
