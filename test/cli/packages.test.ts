/** Packages at start-up, as a user sees them: installed once, offline afterwards, refused when missing. */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { runSvc, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const ig = fileURLToPath(new URL("../fixtures/packages/ig", import.meta.url))
const scratch = scratchDirectories()

const installedLines = (lines: ReadonlyArray<string>) =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry["message"] === "installed package")

describe("packages at start-up", () => {
  it("installs the release defaults on a first start, then starts offline without installing again", async () => {
    const cwd = scratch()
    const first = await startSvc([], { cwd })
    const built = await first.logged("catalog built")
    expect(built["resource_types"]).toBe(2)
    await first.logged("serving")
    const verbose = await (await fetch(`${first.url}/healthz?verbose=1`)).json() as Record<string, unknown>
    expect(verbose["catalog"]).toEqual({ generation: 1, resource_types: 2 })
    expect((await first.stop()).code).toBe(0)
    expect(installedLines(first.lines()).map((entry) => entry["package"])).toEqual(["hl7.fhir.r4.core@4.0.1", "hl7.terminology.r4@7.0.1"])

    const empty = join(cwd, "empty-mirror")
    mkdirSync(empty)
    const second = await startSvc([], { cwd, env: { SVC_CONFORMANCE_PACKAGE_REGISTRY: empty } })
    await second.logged("serving")
    expect((await second.stop()).code).toBe(0)
    expect(installedLines(second.lines())).toEqual([])
  })

  it("does not start on a first start when the release defaults cannot be had, and says what it tried", async () => {
    const cwd = scratch()
    const empty = join(cwd, "empty-mirror")
    mkdirSync(empty)
    const result = await runSvc([], { cwd, env: { SVC_CONFORMANCE_PACKAGE_REGISTRY: empty } })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("hl7.fhir.r4.core")
    expect(result.stderr).toContain("empty-mirror")
  })

  it("installs an implementation guide named with --package, recorded and kept", async () => {
    const cwd = scratch()
    const server = await startSvc(["--package", ig], { cwd })
    await server.logged("serving")
    expect((await server.stop()).code).toBe(0)
    expect(installedLines(server.lines()).map((entry) => entry["package"])).toContain("example.fhir.ig@0.1.0")
  })

  it("refuses a --package path that does not exist, naming it", async () => {
    const result = await runSvc(["--package", "./no/such/guide.tgz"], { cwd: scratch() })
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("no/such/guide.tgz")
  })
})

describe("packages on Postgres", async () => {
  const { available, url } = await suiteDatabase()

  it.skipIf(!available)("installs once and builds the catalog", async () => {
    const first = await startSvc(["--postgres", url()], { cwd: scratch() })
    expect((await first.logged("catalog built"))["resource_types"]).toBe(2)
    await first.logged("serving")
    await first.stop()
    const second = await startSvc(["--postgres", url()], { cwd: scratch() })
    await second.logged("serving")
    await second.stop()
    expect(installedLines(first.lines())).toHaveLength(2)
    expect(installedLines(second.lines())).toEqual([])
  })
})
