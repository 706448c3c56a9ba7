/**
 * The writer lease (ARCHITECTURE.md, "Writes and the change feed", "Multi-process"): only the process that
 * holds it may commit. The Writer checks it inside every write transaction, before the command and again
 * right before COMMIT, so a process that lost the lease (fenced: another took over) commits nothing, even
 * a command already running. On SQLite the process holds the database file's lock for its whole life, so the
 * lease is always held; on a Postgres cluster the lease is a row whose epoch the check reads in the same
 * transaction (with the cluster roles).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Data, Effect, Layer } from "effect"

/** This process no longer holds the writer lease: it must not commit. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{
  /** Why the lease is not held (taken by another process, expired...). */
  readonly reason: string
}> {
  override get message(): string {
    return this.reason
  }
}

export class WriterLease extends Context.Tag("svc/db/WriterLease")<WriterLease, {
  /**
   * Succeeds while this process may commit; run on the writer's connection, inside the transaction, before the
   * command (`changes` undefined) and right before COMMIT (`changes`: how many resources the commit changes).
   */
  readonly check: (sql: SqlClient.SqlClient, changes?: number) => Effect.Effect<void, LeaseLost | SqlError>
  /**
   * When given, the last statement of a transaction that changes resources: writes its commits' rows of the change log
   * (`svc_commits`) only while the lease is held, and fails with LeaseLost otherwise, in one statement; the Writer
   * then makes no other check for that commit (before its command or after). Commits that change no resource are
   * checked with `check` before COMMIT.
   */
  readonly recordCommit?: (sql: SqlClient.SqlClient, commits: ReadonlyArray<CommitRow>) => Effect.Effect<void, LeaseLost | SqlError>
}>() {}

/** A commit's row of the change log (`svc_commits`); a group commit writes several in one transaction. */
export interface CommitRow {
  readonly commitTs: number
  readonly actor: string
  readonly requestId: string | null
}

/** The lease of a process that alone can write its database (SQLite: the file lock held since start-up). */
export const alwaysHeld = Layer.succeed(WriterLease, WriterLease.of({ check: () => Effect.void }))

/**
 * The lease of a replica (docs/cluster.md), which never holds the writer lease: its Writer commits only what
 * changes no resource (its own metering, audit and request-log rows, its heartbeat); a commit that would change
 * resources is refused before COMMIT. Its writes of resources go to the primary.
 */
export const replicaCheck: WriterLease["Type"]["check"] = (_sql, changes) =>
  changes === undefined || changes === 0
    ? Effect.void
    : Effect.fail(new LeaseLost({ reason: "a replica does not write resources: its writes go to the primary" }))

export const replicaLease = Layer.succeed(WriterLease, WriterLease.of({ check: replicaCheck }))
