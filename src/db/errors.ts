/** The errors of the db module: each renders as one line that names the database and the cause. */
import { Schema } from "effect"

/** The database could not be opened (or its TLS settings are wrong); the process must not start. */
export class DatabaseOpenError extends Schema.TaggedError<DatabaseOpenError>()("DatabaseOpenError", {
  database: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot open database ${this.database}: ${this.reason}`
  }
}

/** A query against an open database failed. */
export class DatabaseError extends Schema.TaggedError<DatabaseError>()("DatabaseError", {
  operation: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `database ${this.operation} failed: ${this.reason}`
  }
}

/** A migration's SQL failed; its transaction was rolled back, so nothing was applied. */
export class MigrationFailed extends Schema.TaggedError<MigrationFailed>()("MigrationFailed", {
  migration: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `migration ${this.migration} failed: ${this.reason}; nothing was applied`
  }
}

/** This build must not run against the database (newer build, other FHIR version). */
export class MigrationRefused extends Schema.TaggedError<MigrationRefused>()("MigrationRefused", {
  reason: Schema.String,
  /** The database lacks only migrations of this build, which its primary will apply: a replica may wait. */
  pendingOnly: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {
  override get message(): string {
    return this.reason
  }
}

/** The migration files shipped with this build are missing or malformed. */
export class MigrationFilesInvalid extends Schema.TaggedError<MigrationFilesInvalid>()("MigrationFilesInvalid", {
  reason: Schema.String
}) {
  override get message(): string {
    return `migration files: ${this.reason}`
  }
}

/** The plain-words text of an unknown failure, without stack traces. */
export const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = "cause" in cause && cause.cause !== undefined ? cause.cause : undefined
    // SqlError wraps the driver's error: its own message ("Failed to execute statement") says little.
    if (inner instanceof Error && inner.message !== "") return inner.message
    return cause.message
  }
  return String(cause)
}

/** Another svc process holds the database (src/db/ProcessLock.ts): this one must not start. Exit status 3. */
export class DatabaseInUse extends Schema.TaggedError<DatabaseInUse>()("DatabaseInUse", {
  database: Schema.String
}) {
  override get message(): string {
    return `database ${this.database} is in use by another svc process; stop it first (one process per database)`
  }
}

/**
 * Whether a failed statement hit one of the database's limits (docs/database.md, "Deadlines"): it ran past
 * `database.statement_timeout_ms` ("deadline"; Postgres error 57014 from the statement timeout), or no pool
 * connection was free in time ("pool"). Undefined for any other failure.
 */
export const databaseLimit = (error: unknown): "deadline" | "pool" | undefined => {
  for (let at: unknown = error, depth = 0; typeof at === "object" && at !== null && depth < 5; depth++) {
    const code = "code" in at ? at.code : undefined
    const message = "message" in at && typeof at.message === "string" ? at.message : ""
    if (code === "57014" && message.includes("statement timeout")) return "deadline"
    if (message.includes("timeout exceeded when trying to connect")) return "pool"
    at = "cause" in at ? at.cause : undefined
  }
  return undefined
}
