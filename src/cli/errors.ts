/** Failures that end the process, each with the exit code it stands for. */
import { Schema } from "effect"

/** Wrong arguments: exit status 2. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", { message: Schema.String }) {}

/** A capability named by a flag or setting that this build does not have yet: exit status 1. */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", { message: Schema.String }) {}

/** Leave with this exit code; the message was printed already (or there is none). */
export class ExitWith extends Schema.TaggedError<ExitWith>()("ExitWith", { code: Schema.Number }) {}
