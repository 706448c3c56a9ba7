/**
 * `npm run build` bundles the server into dist/svc.mjs, which `npm start` and the `svc` command run: the
 * bundle starts, finds its migrations, opens SQLite (a native module outside the bundle), installs the
 * packages and serves, as the TypeScript does.
 */
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { startSvc } from "../support/process.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))
const bundle = join(root, "dist", "svc.mjs")

describe("the bundle", () => {
  it("builds, starts on SQLite in memory, serves reads and writes, and stops cleanly", async () => {
    execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { cwd: root, stdio: "pipe" })
    const version = execFileSync(process.execPath, [bundle, "--version"], { encoding: "utf8" })
    expect(version).toMatch(/\d+\.\d+\.\d+/)
    const svc = await startSvc(["--memory"], { bundle })
    try {
      await svc.logged("serving")
      expect((await fetch(`${svc.url}/readyz`)).status).toBe(200)
      const created = await fetch(`${svc.url}/fhir/Patient`, {
        method: "POST",
        headers: { "content-type": "application/fhir+json" },
        body: JSON.stringify({ resourceType: "Patient", gender: "female" })
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      const read = await fetch(`${svc.url}/fhir/Patient/${id}`)
      expect(read.status).toBe(200)
      expect(((await read.json()) as { gender: string }).gender).toBe("female")
      const found = await fetch(`${svc.url}/fhir/Patient?gender=female`)
      expect(((await found.json()) as { entry: Array<unknown> }).entry).toHaveLength(1)
    } finally {
      const finished = await svc.stop()
      expect(finished.code).toBe(0)
    }
  }, 120_000)
})
