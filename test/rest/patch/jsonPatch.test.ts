import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { parseJson, stringifyJson } from "../../../src/json/Json.ts"
import { jsonPatch, maxCopiedValues } from "../../../src/rest/patch/jsonPatch.ts"
import { readSharedCases } from "./sharedCases.ts"

interface SharedCase {
  readonly comment: string
  readonly doc: unknown
  readonly patch: unknown
  readonly expected?: unknown
  readonly error?: string
}

const sharedCases = readSharedCases("patch/json-patch-tests.json") as ReadonlyArray<SharedCase> | undefined

const problemOf = (result: Either.Either<unknown, { readonly code: string; readonly diagnostics: string }>) => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

describe.skipIf(sharedCases === undefined)("JSON Patch: the shared FHIR test cases", () => {
  it("has the 16 cases", () => expect(sharedCases).toHaveLength(16))

  for (const testCase of sharedCases ?? []) {
    if (testCase.error !== undefined) {
      it(`${testCase.comment} fails (${testCase.error})`, () => {
        expect(problemOf(jsonPatch(testCase.doc, testCase.patch)).code).toBe("processing")
      })
    } else {
      it(`${testCase.comment} gives the expected document`, () => {
        expect(jsonPatch(testCase.doc, testCase.patch)).toEqual(Either.right(testCase.expected))
      })
    }
  }
})

describe("JSON Patch: malformed patch documents are invalid and name the operation", () => {
  const doc = { a: 1 }
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["not an array", { op: "add" }, "must be an array"],
    ["an operation that is not an object", [null], "operation 0: must be an object"],
    ["an unknown op", [{ op: "merge", path: "/a" }], "operation 0: \"op\" must be one of"],
    ["a missing op", [{ path: "/a" }], "operation 0: \"op\" must be one of"],
    ["a missing path", [{ op: "remove" }], "operation 0: \"path\" must be a string"],
    ["a path that is no pointer", [{ op: "remove", path: "a" }], "must be empty or start with \"/\""],
    ["a bad escape", [{ op: "remove", path: "/a~2" }], "\"~\" must be followed by 0 or 1"],
    ["add without value", [{ op: "add", path: "/b" }], "\"add\" needs a \"value\""],
    ["replace without value", [{ op: "test", path: "/a", value: 1 }, { op: "replace", path: "/a" }], "operation 1: \"replace\" needs"],
    ["test without value", [{ op: "test", path: "/a" }], "\"test\" needs a \"value\""],
    ["move without from", [{ op: "move", path: "/b" }], "\"from\" must be a string"],
    ["copy with a bad from", [{ op: "copy", path: "/b", from: "a" }], "must be empty or start with \"/\""]
  ]
  for (const [name, patch, message] of cases) {
    it(name, () => {
      const problem = problemOf(jsonPatch(doc, patch))
      expect(problem.code).toBe("invalid")
      expect(problem.diagnostics).toContain(message)
    })
  }

  it("checks the whole document before applying anything", () => {
    const problem = problemOf(jsonPatch(doc, [{ op: "test", path: "/a", value: 2 }, { op: "nope", path: "/a" }]))
    expect(problem.code).toBe("invalid")
    expect(problem.diagnostics).toContain("operation 1")
  })

  it("accepts a null value", () => {
    expect(jsonPatch(doc, [{ op: "add", path: "/b", value: null }])).toEqual(Either.right({ a: 1, b: null }))
  })
})

describe("JSON Patch: operations that cannot be applied are processing problems naming index and path", () => {
  const doc = { name: [{ given: ["Ann", "Bea"] }], active: true }
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["a failed test", [{ op: "test", path: "/active", value: false }], "operation 0 (test /active): test failed: the value is true, not false"],
    ["a missing path", [{ op: "remove", path: "/gender" }], "operation 0 (remove /gender): path /gender does not exist"],
    ["a missing parent", [{ op: "add", path: "/a/b", value: 1 }], "operation 0 (add /a/b): path /a does not exist"],
    ["an index out of range", [{ op: "add", path: "/name/0/given/3", value: "C" }], "index 3 is out of range (the array has 2 elements)"],
    ["removing past the end", [{ op: "remove", path: "/name/0/given/2" }], "index 2 is out of range"],
    ["a token that is not an index", [{ op: "replace", path: "/name/x", value: 1 }], "path /name/x does not exist"],
    ["a leading zero", [{ op: "add", path: "/name/01", value: 1 }], "\"01\" is not an array index"],
    ["- for remove", [{ op: "remove", path: "/name/-" }], "\"-\" is not an array index"],
    ["a primitive parent", [{ op: "add", path: "/active/x", value: 1 }], "path /active is neither an object nor an array"],
    ["moving into a child of itself", [{ op: "move", from: "/name", path: "/name/0/x" }], "cannot move /name into one of its own children"],
    ["moving from nowhere", [{ op: "move", from: "/x", path: "/y" }], "operation 0 (move from /x /y): path /x does not exist"],
    ["removing the document", [{ op: "remove", path: "" }], "the whole document cannot be removed"],
    ["the second operation", [{ op: "test", path: "/active", value: true }, { op: "remove", path: "/x" }], "operation 1 (remove /x)"]
  ]
  for (const [name, patch, message] of cases) {
    it(name, () => {
      const problem = problemOf(jsonPatch(doc, patch))
      expect(problem.code).toBe("processing")
      expect(problem.diagnostics).toContain(message)
    })
  }
})

describe("JSON Patch: semantics", () => {
  it("copies, moves within arrays and to the end with -", () => {
    const doc = { a: [1, 2, 3], b: { c: "x" } }
    expect(jsonPatch(doc, [
      { op: "copy", from: "/b", path: "/d" },
      { op: "move", from: "/a/0", path: "/a/-" },
      { op: "replace", path: "/d/c", value: "y" }
    ])).toEqual(Either.right({ a: [2, 3, 1], b: { c: "x" }, d: { c: "y" } }))
  })

  it("replaces and adds at the root", () => {
    expect(jsonPatch({ a: 1 }, [{ op: "replace", path: "", value: { b: 2 } }])).toEqual(Either.right({ b: 2 }))
    expect(jsonPatch({ a: 1 }, [{ op: "add", path: "", value: [1] }])).toEqual(Either.right([1]))
  })

  it("moving a value onto itself changes nothing", () => {
    expect(jsonPatch({ a: 1 }, [{ op: "move", from: "/a", path: "/a" }])).toEqual(Either.right({ a: 1 }))
  })

  it("tests deep equality regardless of member order", () => {
    const doc = { a: { x: [1, { y: null }], z: "s" } }
    expect(Either.isRight(jsonPatch(doc, [{ op: "test", path: "/a", value: { z: "s", x: [1, { y: null }] } }]))).toBe(true)
    expect(Either.isLeft(jsonPatch(doc, [{ op: "test", path: "/a/x", value: [{ y: null }, 1] }]))).toBe(true)
    expect(Either.isLeft(jsonPatch(doc, [{ op: "test", path: "/a/x/1", value: { y: null, w: 1 } }]))).toBe(true)
  })

  it("treats __proto__ as an ordinary member", () => {
    const result = jsonPatch({}, [{ op: "add", path: "/__proto__", value: { polluted: true } }])
    const patched = Either.getOrThrow(result) as Record<string, unknown>
    expect(Object.getPrototypeOf(patched)).toBe(Object.prototype)
    expect(Object.hasOwn(patched, "__proto__")).toBe(true)
  })
})

describe("JSON Patch: the input is never changed", () => {
  it("leaves the document and the patch as they were, and shares nothing with them", () => {
    const doc = { name: [{ given: ["Ann"] }], meta: { tag: [{ code: "a" }] } }
    const value = { family: "Lee" }
    const patch = [
      { op: "add", path: "/name/-", value },
      { op: "remove", path: "/name/0/given/0" },
      { op: "move", from: "/meta/tag", path: "/tag" },
      { op: "copy", from: "/name/1", path: "/copied" }
    ]
    const docBefore = structuredClone(doc)
    const patchBefore = structuredClone(patch)
    const patched = Either.getOrThrow(jsonPatch(doc, patch)) as { name: Array<Record<string, unknown>> }
    expect(doc).toEqual(docBefore)
    expect(patch).toEqual(patchBefore)
    patched.name[1]!["family"] = "changed"
    expect(value.family).toBe("Lee")
  })

  it("leaves the document unchanged when a later operation fails", () => {
    const doc = { a: [1, 2] }
    expect(Either.isLeft(jsonPatch(doc, [{ op: "remove", path: "/a/0" }, { op: "test", path: "/a/0", value: 1 }]))).toBe(true)
    expect(doc).toEqual({ a: [1, 2] })
  })
})

describe("JSON Patch: copies are bounded", () => {
  it("refuses a patch whose copies would duplicate more than maxCopiedValues values (each copy of the root doubles the document)", () => {
    const doc = { name: Array.from({ length: 1000 }, (_, i) => ({ family: `F${i}` })) }
    const doubling = Array.from({ length: 40 }, (_, i) => ({ op: "copy", from: "", path: `/copy${i}` }))
    const problem = problemOf(jsonPatch(doc, doubling))
    expect(problem.code).toBe("too-costly")
    expect(problem.diagnostics).toContain(`more than ${maxCopiedValues} values`)
  })

  it("applies copies that stay within the bound", () => {
    const doc = { name: [{ family: "A" }] }
    const patched = Either.getOrThrow(jsonPatch(doc, [{ op: "copy", from: "", path: "/one" }, { op: "copy", from: "", path: "/two" }])) as Record<string, any>
    expect(patched["two"]["one"]).toEqual({ name: [{ family: "A" }] })
  })
})

describe("JSON Patch: decimals keep their text", () => {
  const patched = (doc: string, patch: string) => stringifyJson(Either.getOrThrow(jsonPatch(parseJson(doc), parseJson(patch))))

  it("keeps the text of what it leaves, moves or copies, and gives a value set the patch's text", () => {
    expect(patched(`{"a":[1.0,2.0,3.0],"b":4.50}`, `[{"op":"add","path":"/a/0","value":1.00},{"op":"remove","path":"/a/2"}]`))
      .toBe(`{"a":[1.00,1.0,3.0],"b":4.50}`)
    expect(patched(`{"a":[1.0,2.0,3.0],"b":4.50}`, `[{"op":"move","from":"/a/0","path":"/a/-"},{"op":"copy","from":"/b","path":"/c"}]`))
      .toBe(`{"a":[2.0,3.0,1.0],"b":4.50,"c":4.50}`)
    expect(patched(`{"a":[1.0,2.0],"b":4.50}`, `[{"op":"replace","path":"/b","value":4.5},{"op":"replace","path":"/a/1","value":2.000}]`))
      .toBe(`{"a":[1.0,2.000],"b":4.5}`)
    expect(patched(`{"a":{"x":[1.10]}}`, `[{"op":"add","path":"/b","value":{"y":[2.20]}},{"op":"move","from":"/a","path":"/c"}]`))
      .toBe(`{"b":{"y":[2.20]},"c":{"x":[1.10]}}`)
  })

  it("leaves the input's texts as they were", () => {
    const doc = parseJson(`{"a":[1.0,2.0]}`)
    Either.getOrThrow(jsonPatch(doc, parseJson(`[{"op":"remove","path":"/a/0"},{"op":"replace","path":"/a/0","value":7}]`)))
    expect(stringifyJson(doc)).toBe(`{"a":[1.0,2.0]}`)
  })
})
