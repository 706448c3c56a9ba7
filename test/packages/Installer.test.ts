import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Database } from "../../src/db/Database.ts"
import { terminalProgress } from "../../src/app/Conformance.ts"
import { installedPackages, installPackage, installPackages, type InstallablePackage } from "../../src/packages/Installer.ts"
import { currentOfTypes, readCurrent } from "../../src/store/reads.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"


const sample: InstallablePackage = {
  name: "example.fhir.test",
  version: "1.0.0",
  source: "directory fixtures/example",
  checksum: "abc123",
  resources: [
    { file: "StructureDefinition-a.json", resource: { resourceType: "StructureDefinition", id: "a", url: "http://example.org/a" } },
    { file: "SearchParameter-b.json", resource: { resourceType: "SearchParameter", id: "b", code: "b" } },
    { file: "no-id.json", resource: { resourceType: "ValueSet" } }
  ]
}

for (const backend of backends) {
  describe.skipIf(backend.skip)(`installing a package on ${backend.kind}`, () => {
    it.scoped("stores its resources as ordinary resources and records the package, once", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const reported: Array<string> = []
        const first = yield* installPackage(sample, (pkg, done, total) => reported.push(`${pkg} ${done}/${total}`))
        expect(reported).toEqual(["example.fhir.test@1.0.0 2/2"])
        expect(first).toEqual({ installed: true, resources: 2, skipped: ["no-id.json"], types: { SearchParameter: 1, StructureDefinition: 1 } })
        const again = yield* installPackage(sample)
        expect(again.installed).toBe(false)
        const { writer: sql } = yield* Database
        const stored = yield* readCurrent(sql, "StructureDefinition", "a")
        expect(JSON.parse(stored!.content!)).toMatchObject({ resourceType: "StructureDefinition", id: "a", meta: { versionId: "1" } })
        expect((yield* currentOfTypes(sql, ["StructureDefinition", "SearchParameter"])).length).toBe(2)
        expect(yield* installedPackages).toEqual([{
          name: "example.fhir.test",
          version: "1.0.0",
          source: "directory fixtures/example",
          checksum: "abc123",
          substitutedFrom: null,
          resources: 2
        }])
      })))

    it.scoped("installs several packages in one commit, a resource they share written once as the later one has it", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const shared = (owner: string) => ({ file: "SearchParameter-shared.json", resource: { resourceType: "SearchParameter", id: "shared", code: owner } })
        const dependency: InstallablePackage = { ...sample, name: "example.fhir.dep", resources: [shared("dep")] }
        const guide: InstallablePackage = { ...sample, name: "example.fhir.guide", resources: [shared("guide"), ...sample.resources] }
        const { outcomes, commitTs } = yield* installPackages([dependency, guide])
        expect(outcomes.map((outcome) => [outcome.installed, outcome.resources])).toEqual([[true, 1], [true, 3]])
        const { writer: sql } = yield* Database
        const stored = yield* readCurrent(sql, "SearchParameter", "shared")
        expect(JSON.parse(stored!.content!)).toMatchObject({ code: "guide", meta: { versionId: "1" } })
        expect(stored!.commitTs).toBe(commitTs)
        expect((yield* installedPackages).map((pkg) => pkg.name)).toEqual(["example.fhir.dep", "example.fhir.guide"])
        const again = yield* installPackages([dependency, guide])
        expect([again.commitTs, again.outcomes.map((outcome) => outcome.installed)]).toEqual([undefined, [false, false]])
      })))
  })
}

describe("install progress on a terminal", () => {
  it("draws a bar on a terminal and nothing elsewhere", () => {
    const written: Array<string> = []
    const tty = { isTTY: true, write: (text: string) => written.push(text) } as unknown as NodeJS.WriteStream
    const bar = terminalProgress(tty)!
    bar("p@1", 1, 2)
    bar("p@1", 2, 2)
    expect(written.join("")).toBe(`\rp@1 [${"#".repeat(15)}${" ".repeat(15)}] 1/2\rp@1 [${"#".repeat(30)}] 2/2\n`)
    expect(terminalProgress({ isTTY: false } as unknown as NodeJS.WriteStream)).toBeUndefined()
  })
})
