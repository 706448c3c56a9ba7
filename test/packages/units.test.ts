import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { parse } from "../../src/packages/PackageSpec.ts"
import { entryPath, extractTgz } from "../../src/packages/tarball.ts"
import { pick } from "../../src/packages/versions.ts"
import { tempDir, tgz, writeFiles } from "./support.ts"

describe("PackageSpec.parse", () => {
  it.effect("tells name@version from paths", () =>
    Effect.gen(function*() {
      expect(yield* parse("hl7.fhir.us.core@6.1.0")).toEqual({ _tag: "Named", name: "hl7.fhir.us.core", version: "6.1.0" })
      expect(yield* parse("hl7.fhir.us.core#6.1.0")).toEqual({ _tag: "Named", name: "hl7.fhir.us.core", version: "6.1.0" })
      expect(yield* parse("hl7.fhir.us.core")).toEqual({ _tag: "Named", name: "hl7.fhir.us.core", version: "latest" })
      expect(yield* parse("ig.tgz")).toEqual({ _tag: "Path", path: "ig.tgz" })
      expect(yield* parse("./ig")).toEqual({ _tag: "Path", path: "./ig" })
      expect(yield* parse("~/igs/x")).toEqual({ _tag: "Path", path: Path.join(Os.homedir(), "igs/x") })
      const bad = yield* Effect.exit(parse("bad name@1"))
      expect(Exit.isFailure(bad)).toBe(true)
      expect(Exit.isFailure(yield* Effect.exit(parse("x@")))).toBe(true)
    }))
})

describe("versions.pick", () => {
  it("picks exact versions, ranges and tags", () => {
    const versions = ["1.0.0", "1.2.0", "2.0.0-ballot", "2.0.0"]
    expect(pick(versions, {}, "1.0.0")).toBe("1.0.0")
    expect(pick(versions, {}, "^1.0.0")).toBe("1.2.0")
    expect(pick(versions, {}, "1.x")).toBe("1.2.0")
    expect(pick(versions, { latest: "1.2.0" }, "latest")).toBe("1.2.0")
    expect(pick(versions, {}, "latest")).toBe("2.0.0")
    expect(pick(versions, {}, "current")).toBe("2.0.0")
    expect(pick(versions, {}, "2.0.0-ballot")).toBe("2.0.0-ballot")
    expect(pick(versions, {}, "3.0.0")).toBeUndefined()
  })
})

describe("tarball", () => {
  it("refuses entries that climb out of the package", () => {
    expect(entryPath("package/a/b.json")).toBe("a/b.json")
    expect(entryPath("other/x.json")).toBe("x.json")
    expect(entryPath("package/")).toBeUndefined()
    expect(() => entryPath("package/../../etc/passwd")).toThrow(/unsafe/)
    expect(() => entryPath("/etc/passwd")).toThrow(/unsafe/)
  })

  it.scopedLive("unpacks long names and refuses traversal and oversized entries", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const long = `package/${"d".repeat(80)}/${"f".repeat(60)}.json`
      yield* writeFiles(dir, {
        "good.tgz": tgz({ "package/package.json": "{}", [long]: "{}" }),
        "evil.tgz": tgz({ "package/../evil.json": "{}" }),
        "big.tgz": tgz({ "package/big.json": Buffer.alloc(4096) })
      })
      const out = Path.join(dir, "out")
      yield* Effect.promise(() => Fs.mkdir(out))
      const count = yield* Effect.promise(() => extractTgz(Path.join(dir, "good.tgz"), out))
      expect(count).toBe(2)
      yield* Effect.promise(() => Fs.access(Path.join(out, long)))
      const evil = yield* Effect.tryPromise(() => extractTgz(Path.join(dir, "evil.tgz"), out)).pipe(Effect.flip)
      expect(String(evil.error)).toMatch(/unsafe entry path/)
      yield* Effect.promise(() => Fs.access(Path.join(dir, "evil.json")).then(() => Promise.reject(new Error("escaped")), () => undefined))
      const big = yield* Effect.tryPromise(() => extractTgz(Path.join(dir, "big.tgz"), out, { maxEntryBytes: 1024, maxTotalBytes: 10_000 }))
        .pipe(Effect.flip)
      expect(String(big.error)).toMatch(/larger than 1024 bytes/)
    }))
})
