/** The only edge: arguments → CLI → runtime; every failure becomes one line on stderr and an exit code. */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { cli } from "./cli/Cli.ts"
import { useColor } from "./cli/help.ts"
import { redactUrl } from "./config/Secrets.ts"

const secretVariables = [
  "SVC_OIDC_CLIENT_SECRET", "SVC_SMART_DCR_TOKEN", "SVC_SMART_CONFIDENTIAL_SECRET",
  "SVC_S3_ACCESS_KEY_ID", "SVC_S3_SECRET_ACCESS_KEY", "SVC_AUDIT_KEY"
]

/** A message for standard error, with URL passwords and secret variables' values masked. */
const redacted = (message: string): string =>
  secretVariables.reduce((text, name) => {
    const value = process.env[name]
    return value ? text.split(value).join("***") : text
  }, redactUrl(message))

const args = process.argv.slice(2)
const migrating = args[0] === "migrate"

/** Exit codes (docs/operations.md): 2 for wrong arguments; svc migrate answers 2 for anything it cannot read. */
const exitCodeOf = (error: { readonly _tag: string }): number => {
  if (error._tag === "ExitWith") return "code" in error && typeof error.code === "number" ? error.code : 1
  if (error._tag === "UsageError") return 2
  if (error._tag === "DatabaseInUse" || error._tag === "LeaseHeld") return 3
  if (error._tag === "ConfigError" && "fromFlags" in error && error.fromFlags === true) return 2
  return migrating ? 2 : 1
}

const fail = (message: string, code: number) =>
  Effect.sync(() => {
    process.stderr.write(`svc: ${redacted(message)}\n`)
    process.exitCode = code
  })

const program = cli(args, useColor(process.stdout.isTTY, process.env)).pipe(
  Effect.catchAll((error) =>
    error._tag === "ExitWith" ? Effect.sync(() => void (process.exitCode = exitCodeOf(error))) : fail(error.message, exitCodeOf(error))
  ),
  // A defect is a bug, but the user still gets one line saying what failed, never silence.
  Effect.catchAllDefect((defect) => fail(`unexpected failure: ${defect instanceof Error ? defect.message : String(defect)}`, migrating ? 2 : 1))
)

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)), { disableErrorReporting: true, disablePrettyLogger: true })
