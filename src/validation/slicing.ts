/**
 * Slicing (https://hl7.org/fhir/R4/profiling.html#slicing): each item of a sliced element is given to the
 * first slice whose discriminators it meets, by `value`, `pattern`, `type`, `profile` or `exists`. A
 * discriminator path is a simple FHIRPath: element names, `$this`, `ofType(T)`, `extension('url')`;
 * `resolve()` is not followed. When a slice's discriminator cannot be read from the profile, the slicing
 * is not judged at all rather than judged wrongly.
 */
import { isObject } from "../catalog/json.ts"
import type { ElementNode } from "./compile.ts"
import { equalsFixed, matchesPattern } from "./values.ts"

export interface SliceItem {
  readonly value: unknown
  /** The item's FHIR type: from a choice element's JSON name, a resource's resourceType, or the element's type. */
  readonly type: string
}

/** Per item, the index of its slice or -1; undefined when the slicing cannot be judged. */
export type Assignment = ReadonlyArray<number> | undefined

type Segment = { readonly name: string } | { readonly ofType: string } | { readonly extension: string }

const parsePath = (path: string): ReadonlyArray<Segment> | undefined => {
  if (path === "$this") return []
  const segments: Array<Segment> = []
  for (const part of path.match(/[^.(]+(\([^)]*\))?/g) ?? []) {
    const call = /^(\w+)\((.*)\)$/.exec(part)
    if (call === null) segments.push({ name: part })
    else if (call[1] === "ofType") segments.push({ ofType: call[2]!.trim() })
    else if (call[1] === "extension") segments.push({ extension: call[2]!.trim().replace(/^'|'$/g, "") })
    else return undefined
  }
  return segments
}

/** The element a discriminator path names inside a slice's definition. */
const targetIn = (slice: ElementNode, segments: ReadonlyArray<Segment>): ElementNode | undefined => {
  let node: ElementNode | undefined = slice
  for (const segment of segments) {
    if (node === undefined) return undefined
    if ("ofType" in segment) continue
    if ("extension" in segment) {
      const extensions: ElementNode | undefined = node.children.list.find((child) => child.name === "extension")
      node = extensions?.slices.find((s: ElementNode) => s.types.some((t) => t.profiles.includes(segment.extension)) || fixedUrl(s) === segment.extension)
      continue
    }
    node = node.children.list.find((child) => child.name === segment.name)
  }
  return node
}

const fixedUrl = (node: ElementNode): unknown => node.children.list.find((child) => child.name === "url")?.fixed

const isUpper = (code: number): boolean => code >= 65 && code <= 90

/** The values (with their types) at a path in an item. */
const valuesAt = (item: SliceItem, segments: ReadonlyArray<Segment>): ReadonlyArray<SliceItem> => {
  let current: ReadonlyArray<SliceItem> = [item]
  for (const segment of segments) {
    const next: Array<SliceItem> = []
    for (const { value, type } of current) {
      if ("ofType" in segment) {
        if (type === segment.ofType) next.push({ value, type })
        continue
      }
      if (!isObject(value)) continue
      if ("extension" in segment) {
        const list = value["extension"]
        if (Array.isArray(list)) for (const e of list) if (isObject(e) && e["url"] === segment.extension) next.push({ value: e, type: "Extension" })
        continue
      }
      for (const key in value) {
        const exact = key === segment.name
        if (!exact && !(key.length > segment.name.length && key.startsWith(segment.name) && isUpper(key.charCodeAt(segment.name.length)))) continue
        const childType = exact ? "" : key.slice(segment.name.length)
        const child = value[key]
        for (const v of Array.isArray(child) ? child : [child]) {
          const t = isObject(v) && typeof v["resourceType"] === "string" ? v["resourceType"] : childType
          next.push({ value: v, type: t })
        }
      }
    }
    current = next
  }
  return current
}

type Conforms = (value: unknown, profile: string) => boolean

type Test = (item: SliceItem, conforms: Conforms) => boolean

const discriminatorTest = (slice: ElementNode, discriminator: { readonly type: string; readonly path: string }): Test | undefined => {
  const segments = parsePath(discriminator.path)
  if (segments === undefined) return undefined
  const target = targetIn(slice, segments)
  const at = (item: SliceItem) => valuesAt(item, segments)
  switch (discriminator.type) {
    case "value":
    case "pattern": {
      let fixed = target?.fixed
      let pattern = target?.pattern
      // An extension slice names its extension by profile; its url is that profile's.
      if (fixed === undefined && pattern === undefined && discriminator.path === "url") {
        fixed = slice.types.find((t) => t.code === "Extension")?.profiles[0]
      }
      if (fixed === undefined && pattern === undefined) return undefined
      if (fixed !== undefined) return (item) => at(item).some(({ value }) => equalsFixed(value, fixed))
      return (item) => at(item).some(({ value }) => matchesPattern(value, pattern))
    }
    case "type": {
      const types = target?.types.map((t) => t.code) ?? []
      if (types.length === 0) return undefined
      return (item) => at(item).some(({ type }) => types.includes(type))
    }
    case "profile": {
      const profiles = target?.types.flatMap((t) => (t.profiles.length > 0 ? t.profiles : t.targetProfiles)) ?? []
      if (profiles.length === 0) return undefined
      return (item, conforms) => at(item).some(({ value }) => profiles.some((profile) => conforms(value, profile)))
    }
    case "exists": {
      if (target === undefined) return undefined
      const required = target.min >= 1
      const forbidden = target.max === 0
      if (!required && !forbidden) return undefined
      return (item) => (at(item).length > 0) === required
    }
    default:
      return undefined
  }
}

// The tests of each sliced element, built on first use; null when the slicing cannot be judged.
const compiled = new WeakMap<ElementNode, ReadonlyArray<ReadonlyArray<Test>> | null>()

const testsOf = (node: ElementNode): ReadonlyArray<ReadonlyArray<Test>> | null => {
  const known = compiled.get(node)
  if (known !== undefined) return known
  let tests: Array<ReadonlyArray<Test>> | null = []
  const discriminators = node.slicing?.discriminator ?? []
  if (discriminators.length === 0) tests = null
  for (const slice of node.slices) {
    if (tests === null) break
    const sliceTests: Array<Test> = []
    for (const discriminator of discriminators) {
      const test = discriminatorTest(slice, discriminator)
      if (test === undefined) {
        tests = null
        break
      }
      sliceTests.push(test)
    }
    tests?.push(sliceTests)
  }
  compiled.set(node, tests)
  return tests
}

/** Which slice each item belongs to. */
export const assignSlices = (node: ElementNode, items: ReadonlyArray<SliceItem>, conforms: Conforms): Assignment => {
  if (node.slices.length === 0) return items.map(() => -1)
  const tests = testsOf(node)
  if (tests === null) return undefined
  return items.map((item) => tests.findIndex((sliceTests) => sliceTests.every((test) => test(item, conforms))))
}
