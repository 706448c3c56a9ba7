/** A configuration that cannot be used; `message` is what the user reads (file, setting, what was expected). */
import { Schema } from "effect"

export class ConfigError extends Schema.TaggedError<ConfigError>()("ConfigError", {
  message: Schema.String
}) {}
