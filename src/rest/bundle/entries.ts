/**
 * Reading a batch or transaction Bundle (https://hl7.org/fhir/R4/http.html#transaction): its type,
 * and each entry's request as an interaction on a resource. Problems name the entry.
 */
import { fail, type FhirError } from "../../http/FhirError.ts"
import { forbiddenCharIn, forbiddenCharRule, paramsProblem, urlTextProblem } from "../../validation/fhirText.ts"

export type Method = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE"

/** What an entry's request URL names. */
export type Target =
  | { readonly _tag: "type"; readonly type: string }
  | { readonly _tag: "instance"; readonly type: string; readonly id: string }
  | { readonly _tag: "version"; readonly type: string; readonly id: string; readonly version: string }
  | { readonly _tag: "history"; readonly type?: string | undefined; readonly id?: string | undefined }
  | { readonly _tag: "metadata" }
  /** A search across types (`?_type=...`, no type in the path). */
  | { readonly _tag: "system" }
  /** A compartment search, `{compartment}/{id}/{type|*}`. */
  | { readonly _tag: "compartment"; readonly compartment: string; readonly id: string; readonly type: string }

export interface Entry {
  readonly index: number
  readonly method: Method
  readonly url: string
  readonly target: Target
  /** The query of the URL, when it has one (a search or a conditional interaction). */
  readonly query: string | undefined
  readonly fullUrl: string | undefined
  readonly resource: Record<string, unknown> | undefined
  readonly ifMatch: string | undefined
  readonly ifNoneMatch: string | undefined
  readonly ifModifiedSince: string | undefined
  readonly ifNoneExist: string | undefined
}

export interface ParsedBundle {
  readonly type: "batch" | "transaction"
  readonly entries: ReadonlyArray<Entry>
}

const methods: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"])

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const entryError = (index: number, message: string): FhirError =>
  fail("invalid", `Bundle.entry[${index}]: ${message}`)

const optionalString = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** The target of a request URL relative to `[base]` (an absolute URL under `base` is made relative). */
export const parseTarget = (url: string, base: string): { readonly target: Target; readonly query: string | undefined } | string => {
  let relative = url.startsWith(`${base}/`) ? url.slice(base.length + 1) : url
  if (/^[a-z][a-z0-9+.-]*:/i.test(relative)) return `the URL ${url} is not on this server`
  relative = relative.replace(/^\/+/, "")
  const queryAt = relative.indexOf("?")
  const query = queryAt === -1 ? undefined : relative.slice(queryAt + 1)
  const path = queryAt === -1 ? relative : relative.slice(0, queryAt)
  let parts: Array<string>
  try {
    parts = path.split("/").filter((part) => part !== "").map(decodeURIComponent)
  } catch {
    return `the URL ${url} is not correctly percent-encoded UTF-8`
  }
  const problem = parts.map((part) => forbiddenCharIn(part)).find((found) => found !== undefined)
  if (problem !== undefined) return `the URL ${JSON.stringify(url)} holds ${problem}: ${forbiddenCharRule}`
  const badQuery = query === undefined ? undefined : urlTextProblem(query) ?? paramsProblem(new URLSearchParams(query))
  if (badQuery !== undefined) return `the query of the URL ${JSON.stringify(url)} cannot be read: ${badQuery}`
  const [type, second, third, fourth, ...rest] = parts
  if (type === undefined) return query === undefined ? `the URL ${JSON.stringify(url)} names no resource` : { target: { _tag: "system" }, query }
  if (rest.length > 0) return `the URL ${url} is not a FHIR interaction`
  if (type === "metadata" && second === undefined) return { target: { _tag: "metadata" }, query }
  if (type === "_history" && second === undefined) return { target: { _tag: "history" }, query }
  if (!/^[A-Z][A-Za-z]+$/.test(type)) return `the URL ${url} does not start with a resource type`
  if (second === undefined) return { target: { _tag: "type", type }, query }
  if (second === "_history" && third === undefined) return { target: { _tag: "history", type }, query }
  if (third === undefined) return { target: { _tag: "instance", type, id: second }, query }
  if (third !== "_history") {
    return fourth === undefined && (third === "*" || /^[A-Z][A-Za-z]+$/.test(third))
      ? { target: { _tag: "compartment", compartment: type, id: second, type: third }, query }
      : `the URL ${url} is not a FHIR interaction`
  }
  if (fourth === undefined) return { target: { _tag: "history", type, id: second }, query }
  return { target: { _tag: "version", type, id: second, version: fourth }, query }
}

/** The Bundle's type and entries, or a 400 naming the first problem. */
export const parseBundle = (body: Record<string, unknown>, base: string, maxEntries: number): ParsedBundle | FhirError => {
  if (body["resourceType"] !== "Bundle") return fail("invalid", `POST [base] takes a Bundle, not ${JSON.stringify(body["resourceType"])}`)
  const type = body["type"]
  if (type !== "batch" && type !== "transaction") {
    return fail("invalid", `Bundle.type must be batch or transaction to be processed, not ${JSON.stringify(type)}`)
  }
  const raw = body["entry"] ?? []
  if (!Array.isArray(raw)) return fail("structure", "Bundle.entry must be an array")
  if (raw.length > maxEntries) {
    return fail("too-costly", `the Bundle has ${raw.length} entries; this server takes at most ${maxEntries} (server.max_bundle_entries)`, 413)
  }
  const entries: Array<Entry> = []
  const fullUrls = new Map<string, number>()
  for (const [index, item] of raw.entries()) {
    if (!isObject(item)) return entryError(index, "is not an object")
    const request = item["request"]
    if (!isObject(request)) return entryError(index, "has no request")
    const method = request["method"]
    if (typeof method !== "string" || !methods.has(method)) return entryError(index, `request.method ${JSON.stringify(method)} is not one of GET, HEAD, POST, PUT, PATCH, DELETE`)
    const url = request["url"]
    if (typeof url !== "string" || url === "") return entryError(index, "request.url is missing")
    // An operation is a request FHIR allows in a Bundle, but this build does not run one there.
    if (/(?:^|\/)\$[^/?]/.test(url.split("?")[0]!)) {
      return fail("not-supported", `Bundle.entry[${index}]: the operation in ${url} is not available inside a Bundle in this build`, 501)
    }
    const parsed = parseTarget(url, base)
    if (typeof parsed === "string") return entryError(index, parsed)
    const fullUrl = optionalString(item["fullUrl"])
    if (fullUrl !== undefined) {
      const earlier = fullUrls.get(fullUrl)
      if (earlier !== undefined) return entryError(index, `fullUrl ${fullUrl} is already used by entry ${earlier}`)
      fullUrls.set(fullUrl, index)
    }
    const resource = item["resource"]
    if (resource !== undefined && !isObject(resource)) return entryError(index, "resource is not an object")
    if ((method === "POST" || method === "PUT" || method === "PATCH") && resource === undefined) {
      return entryError(index, `a ${method} entry needs a resource`)
    }
    entries.push({
      index,
      method: method as Method,
      url,
      target: parsed.target,
      query: parsed.query,
      fullUrl,
      resource,
      ifMatch: optionalString(request["ifMatch"]),
      ifNoneMatch: optionalString(request["ifNoneMatch"]),
      ifModifiedSince: optionalString(request["ifModifiedSince"]),
      ifNoneExist: optionalString(request["ifNoneExist"])
    })
  }
  return { type, entries }
}
