/** A configuration that cannot be used; `message` is what the user reads (file, setting, what was expected). */
import { Schema } from "effect"

export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  message: Schema.String,
  /** Every value at fault came from a command-line flag: the arguments are wrong (exit status 2). */
  fromFlags: Schema.optionalWith(Schema.Boolean, { exact: true })
}) {}
