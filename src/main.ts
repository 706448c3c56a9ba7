/** The only edge: arguments → CLI → runtime; failures become one message and an exit code. */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ValidationError } from "@effect/cli"
import { Effect } from "effect"
import { cli } from "./cli/Cli.ts"
import { databaseFlagProblem } from "./cli/databaseFlags.ts"

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
        if (error._tag !== "ExitWith") process.stderr.write(`svc: ${error.message}\n`)
        process.exitCode = exitCodeOf(error, migrating)
      })
    )
  )
})

NodeRuntime.runMain(program.pipe(Effect.provide(NodeContext.layer)), { disableErrorReporting: true, disablePrettyLogger: true })
