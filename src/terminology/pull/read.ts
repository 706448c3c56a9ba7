/**
 * Reads what a terminology source holds (docs/terminology-pull.md, "Sources"), page by page. A source is a FHIR
 * server's base when `[url]/metadata` answers a CapabilityStatement: its CodeSystem, ValueSet and ConceptMap
 * searches are read with `_count`, following `next` links on the same origin, up to a number of pages.
 * `metadata` answering 401, 403, 407, 429 or 5xx fails the attempt. Otherwise the URL is a file: NDJSON when its Content-Type says so or its lines are JSON objects, else a JSON
 * Bundle (a searchset's `next` links followed as above) or a single resource. What is read is untrusted:
 * text that is not JSON fails the attempt, an NDJSON line that is not a JSON object is counted and skipped,
 * resources of other types are counted and skipped; nothing here writes.
 */
import { Effect } from "effect"
import { parseJson } from "../../json/Json.ts"
import { type Answer, defaultLimits, get, type HttpLimits, SourceError, type Target, withoutCredentials } from "./http.ts"

/** The resource types a pull takes. */
export const terminologyTypes: ReadonlyArray<string> = ["CodeSystem", "ValueSet", "ConceptMap"]

/** What a source turned out to be. */
export type Kind = "fhir-server" | "bundle" | "ndjson" | "resource"

/** One page of a source: its terminology resources, and what was skipped of it. */
export interface Page {
  readonly resources: ReadonlyArray<Record<string, unknown>>
  /** Entries or lines of another resource type, or with none. */
  readonly otherTypes: number
  /** NDJSON lines that are not a JSON object. */
  readonly unreadable: number
}

export interface ReadLimits extends HttpLimits {
  /** `_count` of a search. */
  readonly pageSize: number
  /** The most pages one search (or a searchset's `next` links) is followed for. */
  readonly maxPages: number
  /** Resources of a file handed on at a time. */
  readonly batch: number
}

export const defaultReadLimits: ReadLimits = { ...defaultLimits, pageSize: 100, maxPages: 500, batch: 100 }

const fhirJson = "application/fhir+json, application/json;q=0.9"
const anyFile = "application/fhir+json, application/json;q=0.9, application/fhir+ndjson;q=0.8, application/x-ndjson;q=0.8, application/ndjson;q=0.8, */*;q=0.1"
const ndjsonTypes: ReadonlySet<string> = new Set(["application/fhir+ndjson", "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"])

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

const parsed = (text: string): unknown => {
  try {
    return parseJson(text)
  } catch {
    return undefined
  }
}

/** `[base]/metadata` of a URL taken as a FHIR server's base (its query left out). */
const metadataUrl = (base: URL): URL => {
  const url = new URL(base.href)
  url.search = ""
  url.hash = ""
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/metadata`
  return url
}

/** `[base]/{type}?_count=n`. */
const searchUrl = (base: URL, type: string, count: number): URL => {
  const url = new URL(base.href)
  url.search = ""
  url.hash = ""
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/${type}`
  url.searchParams.set("_count", String(count))
  return url
}

/**
 * The terminology types a CapabilityStatement says can be searched: those its server `rest` lists with a
 * `search-type` interaction (or with no interactions listed); all of them when it lists no resources at all.
 */
export const searchableTypes = (statement: Record<string, unknown>): ReadonlyArray<string> => {
  const rest = Array.isArray(statement["rest"]) ? statement["rest"].filter(isObject) : []
  const server = rest.find((r) => r["mode"] === "server") ?? rest[0]
  const resources = server !== undefined && Array.isArray(server["resource"]) ? server["resource"].filter(isObject) : []
  if (resources.length === 0) return terminologyTypes
  return terminologyTypes.filter((type) =>
    resources.some((resource) => {
      if (resource["type"] !== type) return false
      const interactions = resource["interaction"]
      return !Array.isArray(interactions) || interactions.some((i) => isObject(i) && i["code"] === "search-type")
    })
  )
}

/** Splits the items of one Bundle or file into a page's resources and counts. */
const pageOf = (items: ReadonlyArray<unknown>, unreadable = 0): Page => {
  const resources: Array<Record<string, unknown>> = []
  let otherTypes = 0
  for (const item of items) {
    if (isObject(item) && typeof item["resourceType"] === "string" && terminologyTypes.includes(item["resourceType"])) resources.push(item)
    else otherTypes++
  }
  return { resources, otherTypes, unreadable }
}

const entriesOf = (bundle: Record<string, unknown>): ReadonlyArray<unknown> =>
  Array.isArray(bundle["entry"]) ? bundle["entry"].map((entry) => (isObject(entry) ? entry["resource"] : undefined)) : []

/** The `next` link of a Bundle, resolved against the page's URL; undefined when there is none, null when it is not a URL. */
const nextLink = (bundle: Record<string, unknown>, page: string): URL | undefined | null => {
  const links = Array.isArray(bundle["link"]) ? bundle["link"].filter(isObject) : []
  const next = links.find((link) => link["relation"] === "next")?.["url"]
  if (next === undefined) return undefined
  if (typeof next !== "string" || next === "") return null
  try {
    return new URL(next, page)
  } catch {
    return null
  }
}

/** In pieces of at most `size`, for `onPage`. */
const inPieces = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  const pieces: Array<ReadonlyArray<A>> = []
  for (let start = 0; start < items.length; start += size) pieces.push(items.slice(start, start + size))
  return pieces
}

/** Answers to `[url]/metadata` that end the attempt rather than mark the URL a file. */
const unusable: ReadonlySet<number> = new Set([401, 403, 407, 429])

const failWith = (reason: string) => Effect.fail(new SourceError({ reason }))

/**
 * Follows a searchset from `first` through its `next` links: each page must be a JSON Bundle; a link must stay on
 * the source's origin and not come back to a page already read; at most `limits.maxPages` pages.
 */
const followSearch = <E, R>(
  target: Target,
  first: Answer & { readonly bundle: Record<string, unknown> },
  onPage: (page: Page) => Effect.Effect<void, E, R>,
  limits: ReadLimits
): Effect.Effect<void, SourceError | E, R> =>
  Effect.gen(function*() {
    const seen = new Set<string>([first.url])
    let bundle = first.bundle
    let at = first.url
    for (let pages = 1; ; pages++) {
      for (const piece of inPieces(entriesOf(bundle), limits.batch)) yield* onPage(pageOf(piece))
      const url = nextLink(bundle, at)
      if (url === undefined) return
      if (url === null) return yield* failWith(`the next link of ${at} is not a URL`)
      if (url.origin !== target.url.origin) return yield* failWith(`the next page of ${at} is on another origin (${url.origin}); only ${target.url.origin} is followed`)
      if (seen.has(withoutCredentials(url))) return yield* failWith(`the next page of ${at} is a page already read`)
      if (pages >= limits.maxPages) return yield* failWith(`${withoutCredentials(new URL(first.url))} has more than ${limits.maxPages} pages`)
      url.username = ""
      url.password = ""
      const answer = yield* get(target, url, fhirJson, limits)
      if (answer.status < 200 || answer.status > 299) return yield* failWith(`GET ${answer.url} answered ${answer.status}`)
      const value = parsed(answer.body)
      if (!isObject(value) || value["resourceType"] !== "Bundle") return yield* failWith(`GET ${answer.url} did not answer a JSON Bundle`)
      seen.add(answer.url)
      bundle = value
      at = answer.url
    }
  })

/** An NDJSON text: one resource per non-empty line; a line that is not a JSON object is counted. */
const ndjsonItems = (text: string): { readonly items: ReadonlyArray<unknown>; readonly unreadable: number } => {
  const items: Array<unknown> = []
  let unreadable = 0
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue
    const value = parsed(line)
    if (isObject(value)) items.push(value)
    else unreadable++
  }
  return { items, unreadable }
}

/** Whether a text that is not one JSON value reads as NDJSON: its first non-empty line is a JSON object. */
const looksLikeNdjson = (text: string): boolean => {
  const first = text.split("\n").find((line) => line.trim() !== "")
  return first !== undefined && isObject(parsed(first))
}

/**
 * Reads the source at `target`, handing each page of what it holds to `onPage` as it comes; succeeds with what
 * the source turned out to be, fails with the first request or body that could not be used.
 */
export const readSource = <E, R>(
  target: Target,
  onPage: (page: Page) => Effect.Effect<void, E, R>,
  limits: ReadLimits = defaultReadLimits
): Effect.Effect<Kind, SourceError | E, R> =>
  Effect.gen(function*() {
    const metadata = yield* get(target, metadataUrl(target.url), fhirJson, limits)
    // A file's server has no `metadata` (404 and the like); refused credentials or a failing server are failures.
    if (unusable.has(metadata.status) || metadata.status >= 500) return yield* failWith(`GET ${metadata.url} answered ${metadata.status}`)
    const statement = metadata.status >= 200 && metadata.status <= 299 ? parsed(metadata.body) : undefined
    if (isObject(statement) && statement["resourceType"] === "CapabilityStatement") {
      for (const type of searchableTypes(statement)) {
        const answer = yield* get(target, searchUrl(target.url, type, limits.pageSize), fhirJson, limits)
        if (answer.status < 200 || answer.status > 299) return yield* failWith(`GET ${answer.url} answered ${answer.status}`)
        const bundle = parsed(answer.body)
        if (!isObject(bundle) || bundle["resourceType"] !== "Bundle") return yield* failWith(`GET ${answer.url} did not answer a JSON Bundle`)
        yield* followSearch(target, { ...answer, bundle }, onPage, limits)
      }
      return "fhir-server" as const
    }
    const file = yield* get(target, target.url, anyFile, limits)
    if (file.status < 200 || file.status > 299) return yield* failWith(`GET ${file.url} answered ${file.status}`)
    const whole = ndjsonTypes.has(file.contentType) ? undefined : parsed(file.body)
    if (whole === undefined && (ndjsonTypes.has(file.contentType) || looksLikeNdjson(file.body))) {
      const { items, unreadable } = ndjsonItems(file.body)
      const pieces = inPieces(items, limits.batch)
      if (pieces.length === 0) yield* onPage({ resources: [], otherTypes: 0, unreadable })
      for (const [n, piece] of pieces.entries()) yield* onPage(pageOf(piece, n === 0 ? unreadable : 0))
      return "ndjson" as const
    }
    if (!isObject(whole) || typeof whole["resourceType"] !== "string") {
      return yield* failWith(`GET ${file.url} answered neither a JSON Bundle or resource nor NDJSON`)
    }
    if (whole["resourceType"] !== "Bundle") {
      yield* onPage(pageOf([whole]))
      return "resource" as const
    }
    if (whole["type"] === "searchset") {
      yield* followSearch(target, { ...file, bundle: whole }, onPage, limits)
      return "bundle" as const
    }
    for (const piece of inPieces(entriesOf(whole), limits.batch)) yield* onPage(pageOf(piece))
    return "bundle" as const
  })
