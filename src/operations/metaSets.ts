/**
 * A resource's profiles, security labels and tags as the sets `$meta-add` and `$meta-delete` treat them
 * (https://hl7.org/fhir/R4/resource-operation-meta-add.html, -meta-delete.html): a tag or security label is
 * known by its system and code (its version and display are not compared), a profile by its whole URL.
 * Adding keeps what is there and appends what is new; deleting removes what matches, and it is no error
 * when nothing does.
 */
import { Either } from "effect"
import { fail, type FhirError } from "../http/FhirError.ts"
import { isOfType } from "./arguments.ts"

export interface MetaSets {
  readonly profiles: ReadonlyArray<string>
  readonly security: ReadonlyArray<Record<string, unknown>>
  readonly tags: ReadonlyArray<Record<string, unknown>>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The elements of Meta (https://hl7.org/fhir/R4/resource.html#Meta), with the `_` of its primitives. */
const metaElements = new Set([
  "id", "extension", "versionId", "_versionId", "lastUpdated", "_lastUpdated", "source", "_source", "profile", "_profile", "security", "tag"
])

/** The elements of Coding (https://hl7.org/fhir/R4/datatypes.html#Coding), with the `_` of its primitives. */
const codingElements = new Set([
  "id", "extension", "system", "_system", "version", "_version", "code", "_code", "display", "_display", "userSelected", "_userSelected"
])

const uriLike = /^\S+$/

const codingProblem = (coding: unknown, at: string, what: string): string | undefined => {
  if (!isRecord(coding)) return `${at} is not a Coding`
  const unknown = Object.keys(coding).find((key) => !codingElements.has(key))
  if (unknown !== undefined) return `${at} has '${unknown}', which is not an element of Coding`
  const code = coding["code"]
  if (code === undefined) return `${at} has no code: a ${what} is known by its system and code`
  if (typeof code !== "string" || !isOfType("code", code)) return `${at}.code is not a code`
  const system = coding["system"]
  if (system !== undefined && (typeof system !== "string" || !uriLike.test(system))) return `${at}.system is not a uri`
  for (const key of ["version", "display"]) {
    if (coding[key] !== undefined && typeof coding[key] !== "string") return `${at}.${key} is not a string`
  }
  if (coding["userSelected"] !== undefined && typeof coding["userSelected"] !== "boolean") return `${at}.userSelected is not a boolean`
  return undefined
}

/**
 * The profiles, security labels and tags of the Meta given to `operation`; the rest of a Meta (versionId,
 * lastUpdated, source, extensions) is not read. A 400 naming the element for anything that is not a Meta,
 * a profile that is not a canonical URL, and a tag or security label that is not a Coding with a code.
 */
export const readMetaSets = (meta: Record<string, unknown>, operation: string): Either.Either<MetaSets, FhirError> => {
  const refuse = (problem: string, code: "invalid" | "required" = "invalid") => Either.left(fail(code, `The meta given to ${operation}: ${problem}`))
  const unknown = Object.keys(meta).find((key) => !metaElements.has(key))
  if (unknown !== undefined) return refuse(`'${unknown}' is not an element of Meta`)
  const list = (name: string): ReadonlyArray<unknown> | string => {
    const value = meta[name]
    if (value === undefined) return []
    return Array.isArray(value) ? value : `meta.${name} is not a list`
  }
  const profiles = list("profile")
  if (typeof profiles === "string") return refuse(profiles)
  for (const [n, profile] of profiles.entries()) {
    if (typeof profile !== "string" || !uriLike.test(profile)) return refuse(`meta.profile[${n}] is not a canonical URL`)
  }
  const codings = (name: "security" | "tag", what: string): ReadonlyArray<Record<string, unknown>> | Either.Either<never, FhirError> => {
    const given = list(name)
    if (typeof given === "string") return refuse(given)
    for (const [n, coding] of given.entries()) {
      const problem = codingProblem(coding, `meta.${name}[${n}]`, what)
      if (problem !== undefined) return refuse(problem, problem.includes("has no code") ? "required" : "invalid")
    }
    return given as ReadonlyArray<Record<string, unknown>>
  }
  const security = codings("security", "security label")
  if (Either.isEither(security)) return security
  const tags = codings("tag", "tag")
  if (Either.isEither(tags)) return tags
  return Either.right({ profiles: profiles as ReadonlyArray<string>, security, tags })
}

/** The identity of a tag or security label: its system and code. */
const identity = (coding: unknown): string =>
  isRecord(coding) ? JSON.stringify([coding["system"] ?? null, coding["code"] ?? null]) : JSON.stringify(coding)

/** A list element of `meta` with its `_` twin (the extensions of each profile), kept in step with it. */
interface Entries {
  readonly values: Array<unknown>
  readonly extras: Array<unknown> | undefined
}

const entriesOf = (meta: Record<string, unknown>, name: string): Entries => {
  const values = Array.isArray(meta[name]) ? [...(meta[name] as ReadonlyArray<unknown>)] : []
  const twin = meta[`_${name}`]
  return { values, extras: Array.isArray(twin) ? [...(twin as ReadonlyArray<unknown>)] : undefined }
}

const putEntries = (meta: Record<string, unknown>, name: string, entries: Entries): void => {
  if (entries.values.length === 0) {
    delete meta[name]
    delete meta[`_${name}`]
    return
  }
  meta[name] = entries.values
  if (entries.extras !== undefined) {
    if (entries.extras.some((extra) => extra !== null && extra !== undefined)) meta[`_${name}`] = entries.extras
    else delete meta[`_${name}`]
  }
}

/** `meta` with the profiles, security labels and tags of `sets` that it lacks; undefined when it lacks none. */
export const addToMeta = (meta: Record<string, unknown>, sets: MetaSets): Record<string, unknown> | undefined => {
  const next = { ...meta }
  let changed = false
  const add = (name: string, given: ReadonlyArray<unknown>, key: (value: unknown) => string) => {
    const entries = entriesOf(next, name)
    const present = new Set(entries.values.map(key))
    for (const value of given) {
      const k = key(value)
      if (present.has(k)) continue
      present.add(k)
      entries.values.push(value)
      entries.extras?.push(null)
      changed = true
    }
    putEntries(next, name, entries)
  }
  add("profile", sets.profiles, (value) => String(value))
  add("security", sets.security, identity)
  add("tag", sets.tags, identity)
  return changed ? next : undefined
}

/** `meta` without the profiles, security labels and tags of `sets`; undefined when it has none of them. */
export const removeFromMeta = (meta: Record<string, unknown>, sets: MetaSets): Record<string, unknown> | undefined => {
  const next = { ...meta }
  let changed = false
  const remove = (name: string, given: ReadonlyArray<unknown>, key: (value: unknown) => string) => {
    if (given.length === 0 || !Array.isArray(next[name])) return
    const gone = new Set(given.map(key))
    const entries = entriesOf(next, name)
    const kept: Entries = { values: [], extras: entries.extras === undefined ? undefined : [] }
    for (const [n, value] of entries.values.entries()) {
      if (gone.has(key(value))) {
        changed = true
        continue
      }
      kept.values.push(value)
      kept.extras?.push(entries.extras![n] ?? null)
    }
    putEntries(next, name, kept)
  }
  remove("profile", sets.profiles, (value) => String(value))
  remove("security", sets.security, identity)
  remove("tag", sets.tags, identity)
  return changed ? next : undefined
}

/** The answer of `$meta`, `$meta-add` and `$meta-delete`: a Parameters with the Meta as `return`. */
export const metaParameters = (meta: Record<string, unknown>): Record<string, unknown> => ({
  resourceType: "Parameters",
  parameter: [{ name: "return", valueMeta: meta }]
})
