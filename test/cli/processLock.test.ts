/**
 * One writing process per database (docs/operations.md, docs/cluster.md): a second `svc` on a database another
 * one serves is refused at start with a message and exit status 3 (SQLite: the file's lock; Postgres: a second
 * primary, while the writer lease is held), `svc migrate --status` still reads it, and the lock or lease dies
 * with its process, so after a kill -9 a new server starts at once. Real processes on SQLite and Postgres.
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { runSvc, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()

/** The whole story on the database `flags` name. */
const refusesASecondProcess = async (flags: ReadonlyArray<string>, refusal: string | RegExp) => {
  const cwd = scratch()
  const first = await startSvc(flags, { cwd })
  try {
    await first.logged("serving")
    const second = await runSvc([...flags, "--bind", "127.0.0.1:0"], { cwd })
    expect(second.code).toBe(3)
    expect(second.stderr).toMatch(refusal)
    expect(second.stdout).not.toContain("\"serving\"")
    // Reading the migrations changes nothing and is allowed beside a server.
    expect((await runSvc(["migrate", "--status", ...flags], { cwd })).code).toBe(0)
  } finally {
    // The lock dies with the process, however it ends.
    await first.stop("SIGKILL")
  }
  const third = await startSvc(flags, { cwd })
  await third.logged("serving")
  expect((await third.stop()).code).toBe(0)
}

describe("one svc process per database", async () => {
  const { available, url } = await suiteDatabase()

  it("on a SQLite file: a second process is refused with status 3, and a new one starts after a kill -9", async () => {
    const file = join(scratch(), "shared.sqlite")
    await refusesASecondProcess(["--sqlite", file], `database SQLite file ${file} is in use by another svc process`)
  }, 120_000)

  it.skipIf(!available)("on Postgres: a second primary is refused with status 3, and a new one starts after a kill -9", async () => {
    await refusesASecondProcess(["--postgres", url()], /has a primary already: svc process \S+ holds the writer lease/)
  }, 120_000)
})
