/**
 * Search index values of any length, over HTTP on SQLite and Postgres: the lookup indexes hold a bounded
 * key and the whole text is checked where a key is cut (src/search/indexKey.ts, migration 0008). A Postgres
 * index entry cannot hold some 2.7 KB, so these writes used to fail there. The servers install the real
 * R4 packages: R4's ValueSet v3-ActClassRoot has a description of some 6 KB.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/LongValuesServer")<Server, TestServer>() {}

/** `length` characters of text that repeats with a period, ending in `tail`. */
const long = (length: number, tail: string): string => {
  const words = "lorem ipsum dolor sit amet consectetur adipiscing elit "
  return (words.repeat(Math.ceil(length / words.length)).slice(0, length - tail.length) + tail)
}

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json.id as string
  })

/** The ids of the matches of `query` (relative to the base), sorted. */
const ids = (query: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("GET", `${base}/${query}`)
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([200, reply.text.slice(0, 300)])
    return ((reply.json.entry ?? []) as Array<any>).filter((e) => e.search.mode === "match").map((e) => e.resource.id as string).sort()
  })

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`long index values on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("a 10 KB family name is stored and found by exact and prefix search, and a name that differs only at its end is not", () =>
        Effect.gen(function*() {
          const family = long(10_000, " Zebra")
          const other = long(10_000, " Yak")
          const id = yield* create({ resourceType: "Patient", name: [{ family }] })
          const twin = yield* create({ resourceType: "Patient", name: [{ family: other }] })
          const q = (value: string) => encodeURIComponent(value)
          expect(yield* ids(`Patient?family:exact=${q(family)}`)).toEqual([id])
          expect(yield* ids(`Patient?family=${q(family)}`)).toEqual([id])
          expect(yield* ids(`Patient?family=${q(family.toUpperCase())}`)).toEqual([id])
          // A prefix longer than an index key, one shorter, and one that reaches into where the two differ.
          expect(yield* ids(`Patient?family=${q(family.slice(0, 600))}`)).toEqual([id, twin].sort())
          expect(yield* ids(`Patient?family=${q(family.slice(0, 40))}&_count=1000`)).toEqual(expect.arrayContaining([id, twin]))
          expect(yield* ids(`Patient?family=${q(family.slice(0, 9_996))}`)).toEqual([id])
          expect(yield* ids(`Patient?family:contains=${q("Zebra")}`)).toEqual([id])
          expect(yield* ids(`Patient?_filter=${q(`family eq "${family}"`)}`)).toEqual([id])
          expect(yield* ids(`Patient?_filter=${q(`family gt "${family.slice(0, 9_996)}"`)}&_id=${id},${twin}`)).toEqual([id])
          expect(yield* ids(`Patient?_id=${id},${twin}&_sort=-family`)).toEqual([id, twin].sort())
        }))

      it.effect("a token of a 5 KB system and a 5 KB code is stored and found, and one that differs only at its end is not", () =>
        Effect.gen(function*() {
          const system = `urn:long:${long(5_000, ":system").replaceAll(" ", "-")}`
          const value = long(5_000, "-code-1")
          const id = yield* create({ resourceType: "Patient", identifier: [{ system, value }] })
          const twin = yield* create({ resourceType: "Patient", identifier: [{ system, value: long(5_000, "-code-2") }] })
          const q = encodeURIComponent
          expect(yield* ids(`Patient?identifier=${q(`${system}|${value}`)}`)).toEqual([id])
          expect(yield* ids(`Patient?identifier=${q(value)}`)).toEqual([id])
          expect(yield* ids(`Patient?identifier=${q(`${system}|`)}`)).toEqual([id, twin].sort())
          expect(yield* ids(`Patient?identifier:not=${q(`${system}|${value}`)}&_id=${id},${twin}`)).toEqual([twin])
        }))

      it.effect("R4's ValueSet v3-ActClassRoot, whose description is some 6 KB, is found by url and by name", () =>
        Effect.gen(function*() {
          const url = "http://terminology.hl7.org/ValueSet/v3-ActClassRoot"
          const byUrl = yield* ids(`ValueSet?url=${encodeURIComponent(url)}`)
          expect(byUrl).toHaveLength(1)
          expect(yield* ids("ValueSet?name:exact=ActClassRoot")).toEqual(byUrl)
        }))
    })
  })
}
