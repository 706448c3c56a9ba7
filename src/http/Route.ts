/**
 * What a request asks for, read once from its method and path by the front door (FrontDoor.ts): the
 * interaction (https://hl7.org/fhir/R4/http.html), resource type, id, operation, and the cost class of the
 * rate-limit table (spec: Limits, "Rate limits": read, search, write, bundle, operation, export, sync).
 * Nothing here reads the catalog or the body: a type the server does not know is still a `read` of it
 * (the FHIR app answers 404), and a POST on the base is a Bundle whose kind only its body tells.
 */
import { match, rootRoutes } from "./RootRoutes.ts"

/** The path of the FHIR API; `rest/Rest.ts` names it `basePath`. */
export const fhirBase = "/fhir"

/** The classes of the rate-limit cost table (`[rate_limit.cost]`), by their names there. */
export type CostClass = "read" | "search" | "write" | "bundle" | "operation" | "export" | "sync"

export type Interaction =
  | "read"
  | "vread"
  | "search"
  | "create"
  | "update"
  | "patch"
  | "delete"
  | "history"
  | "capabilities"
  /** `POST [base]` with a Bundle: its `type` (batch or transaction) is in the body. */
  | "batch-or-transaction"
  | "operation"
  /** A path outside the FHIR API held by the root table (RootRoutes.ts). */
  | "root-endpoint"
  /** A path or method no route answers (404 or 405 follows). */
  | "unknown"

/** Where an interaction or operation applies (https://hl7.org/fhir/R4/operations.html#levels). */
export type Level = "system" | "type" | "instance"

export interface Route {
  readonly interaction: Interaction
  readonly cost: CostClass
  readonly level: Level
  /** The resource type named by the path (the compartment's type for a compartment search). */
  readonly type: string | undefined
  readonly id: string | undefined
  /** The version of a vread, or of an operation on a version (`[base]/{type}/{id}/_history/{vid}/$op`). */
  readonly version: string | undefined
  /** The operation's name without `$`. */
  readonly operation: string | undefined
  /** A compartment search's target type (or `*`). */
  readonly target: string | undefined
  /** An update, patch or delete on the type, whose query names the resource. */
  readonly conditional: boolean
}

const route = (
  interaction: Interaction,
  cost: CostClass,
  level: Level,
  type?: string,
  id?: string,
  extra?: { readonly version?: string; readonly operation?: string; readonly target?: string; readonly conditional?: boolean }
): Route => ({
  interaction,
  cost,
  level,
  type,
  id,
  version: extra?.version,
  operation: extra?.operation,
  target: extra?.target,
  conditional: extra?.conditional ?? false
})

const unknown = route("unknown", "read", "system")

/** A path segment as the FHIR app reads it: percent-decoded (undefined when it is not valid UTF-8). */
const decode = (segment: string): string | undefined => {
  if (segment.indexOf("%") === -1) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/** The cost of an operation: `$export` is the export class, every other operation its own. */
const operationCost = (name: string): CostClass => (name === "export" ? "export" : "operation")

/**
 * The route of a request under `[base]`, `segments` being the non-empty path segments after it, as the
 * FHIR app's table (rest/FhirApp.ts) dispatches them. A method a path does not take is `unknown`.
 */
export const fhirRoute = (method: string, segments: ReadonlyArray<string>): Route => {
  const verb = method === "HEAD" ? "GET" : method
  const count = segments.length
  const first = segments[0]
  if (first === undefined) {
    return verb === "GET" ? route("search", "search", "system") : verb === "POST" ? route("batch-or-transaction", "bundle", "system") : unknown
  }
  const last = segments[count - 1]!
  if (last.startsWith("$")) {
    for (let i = 0; i < count - 1; i++) if (segments[i]!.startsWith("$")) return unknown
    const operation = last.slice(1)
    // On a version of an instance: `[base]/{type}/{id}/_history/{vid}/$op` ($meta, $meta-add, $meta-delete).
    if (count === 5 && segments[2] === "_history") {
      return route("operation", operationCost(operation), "instance", first, segments[1], { operation, version: segments[3]! })
    }
    if (count > 3) return unknown
    const level: Level = count === 1 ? "system" : count === 2 ? "type" : "instance"
    return route("operation", operationCost(operation), level, count > 1 ? first : undefined, count > 2 ? segments[1] : undefined, { operation })
  }
  if (count > 4) return unknown
  const second = segments[1]
  if (second === undefined) {
    if (first === "_search") return verb === "POST" ? route("search", "search", "system") : unknown
    if (first === "metadata") return verb === "GET" ? route("capabilities", "read", "system") : unknown
    if (first === "_history") return verb === "GET" ? route("history", "read", "system") : unknown
    switch (verb) {
      case "GET":
        return route("search", "search", "type", first)
      case "POST":
        return route("create", "write", "type", first)
      case "PUT":
        return route("update", "write", "type", first, undefined, { conditional: true })
      case "PATCH":
        return route("patch", "write", "type", first, undefined, { conditional: true })
      case "DELETE":
        return route("delete", "write", "type", first, undefined, { conditional: true })
      default:
        return unknown
    }
  }
  const third = segments[2]
  if (third === undefined) {
    if (second === "_history") return verb === "GET" ? route("history", "read", "type", first) : unknown
    if (second === "_search") return verb === "POST" ? route("search", "search", "type", first) : unknown
    switch (verb) {
      case "GET":
        return route("read", "read", "instance", first, second)
      case "PUT":
        return route("update", "write", "instance", first, second)
      case "PATCH":
        return route("patch", "write", "instance", first, second)
      case "DELETE":
        return route("delete", "write", "instance", first, second)
      default:
        return unknown
    }
  }
  const fourth = segments[3]
  if (third === "_history") {
    if (verb !== "GET") return unknown
    return fourth === undefined
      ? route("history", "read", "instance", first, second)
      : route("vread", "read", "instance", first, second, { version: fourth })
  }
  // `[base]/{Compartment}/{id}/{type or *}` and its POST `_search` (search.html#compartments).
  if (fourth === undefined) return verb === "GET" ? route("search", "search", "instance", first, second, { target: third }) : unknown
  if (fourth === "_search") return verb === "POST" ? route("search", "search", "instance", first, second, { target: third }) : unknown
  return unknown
}

/** The cost class of a root endpoint: `/sync` is its own class, `/graphql` an operation (docs/graphql.md), the rest read. */
const rootCost = (path: string): CostClass => (path === "/sync" ? "sync" : path === "/graphql" ? "operation" : "read")

const rootRoute = (path: string): Route => {
  for (const entry of rootRoutes) {
    if (match(entry.path, path) !== undefined) return route("root-endpoint", rootCost(path), "system")
  }
  return unknown
}

/** Reads the path's segments after `[base]` without splitting the whole URL; undefined when one is not valid percent-encoding. */
const segmentsAfterBase = (path: string): Array<string> | undefined => {
  const segments: Array<string> = []
  let at = fhirBase.length
  while (at < path.length) {
    const next = path.indexOf("/", at + 1)
    const end = next === -1 ? path.length : next
    if (end > at + 1) {
      const segment = decode(path.slice(at + 1, end))
      if (segment === undefined) return undefined
      segments.push(segment)
    }
    at = end
  }
  return segments
}

/** The route of a request, from its method and its URL as Node gives it (path and query). */
export const classify = (method: string, url: string): Route => {
  const queryAt = url.indexOf("?")
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  if (path.startsWith(fhirBase) && (path.length === fhirBase.length || path.charCodeAt(fhirBase.length) === 47 /* "/" */)) {
    const segments = segmentsAfterBase(path)
    return segments === undefined ? unknown : fhirRoute(method, segments)
  }
  return rootRoute(path)
}
