/** The only edge: arguments → CLI → runtime; failures become one message and an exit code. */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ValidationError } from "@effect/cli"
import { Effect } from "effect"
import { cli } from "./cli/Cli.ts"
import { databaseFlagProblem } from "./cli/databaseFlags.ts"
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

/** `-V` is the short form of `--version`. */
const args = process.argv.map((arg, index) => (index >= 2 && arg === "-V" ? "--version" : arg))

const exitCodeOf = (error: { readonly _tag?: string }, migrating: boolean): number => {
  switch (error._tag) {
    case "ExitWith":
      return "code" in error && typeof error.code === "number" ? error.code : 1
    case "UsageError":
      return 2
    default:
      // svc migrate: any failure to read the database or the arguments is 2 (spec: Errors).
      return migrating ? 2 : 1
  }
}

const program = Effect.gen(function*() {
  const migrating = args.slice(2).includes("migrate")
  const problem = databaseFlagProblem(args.slice(2))
  if (problem !== undefined) {
    yield* Effect.sync(() => {
      process.stderr.write(`svc: ${problem}\n`)
      process.exitCode = 2
    })
    return
  }
  yield* cli(args).pipe(
    Effect.catchAll((error) =>
      Effect.sync(() => {
        if (ValidationError.isValidationError(error)) {
          // The CLI printed the problem and the usage already.
          process.exitCode = 2
          return
        }
        if (error._tag !== "ExitWith") process.stderr.write(`svc: ${redacted(error.message)}\n`)
        process.exitCode = exitCodeOf(error, migrating)
      })
    )
  )
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)), { disableErrorReporting: true, disablePrettyLogger: true })
