/**
 * SMART App Launch 2.2 scopes (hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html), read into what
 * they grant. One parser serves every place that needs to know what a scope means: the consent page, the
 * token's scopes at the front door, discovery's `scopes_supported`, the governance endpoints.
 *
 * - Resource scopes, `<patient|user|system>/<Type|*>.<permissions>`:
 *   - v2: permissions are letters of `cruds` (create, read, update, delete, search), each at most once and in
 *     that order (`rs`, `cud`; `sr` is not a scope), optionally narrowed by a query of `name=value` pairs
 *     (`patient/Observation.rs?category=laboratory`), which grants only the resources the query matches;
 *   - v1: `read` (read and search), `write` (create, update, delete) or `*` (all five); no query.
 * - Launch scopes: `launch` (an EHR launch), `launch/patient`, `launch/encounter` (a standalone launch asking
 *   for that context).
 * - Identity scopes: `openid`, `fhirUser`, `profile`; refresh scopes: `offline_access`, `online_access`.
 *
 * Anything else is `Unknown`, with the reason: a server grants none of it.
 */

export type ScopeContext = "patient" | "user" | "system"

/** SMART v2 permissions: create, read, update, delete, search. */
export type Permission = "c" | "r" | "u" | "d" | "s"

/** The v2 letters in the only order they may come in. */
export const permissionOrder: ReadonlyArray<Permission> = ["c", "r", "u", "d", "s"]

export interface ResourceScope {
  readonly _tag: "Resource"
  readonly text: string
  readonly context: ScopeContext
  /** A resource type, or `*` for every type. */
  readonly type: string
  readonly permissions: ReadonlySet<Permission>
  /** 1: `read`, `write`, `*`; 2: `cruds` letters. */
  readonly version: 1 | 2
  /** The v2 query narrowing the scope, as name and value pairs in their order; empty for the whole type. */
  readonly query: ReadonlyArray<readonly [string, string]>
}

export interface LaunchScope {
  readonly _tag: "Launch"
  readonly text: string
  /** `launch`: undefined (the EHR gives the context); `launch/patient`, `launch/encounter`: the context asked for. */
  readonly context: "patient" | "encounter" | undefined
}

export interface IdentityScope {
  readonly _tag: "Identity"
  readonly text: string
  readonly name: "openid" | "fhirUser" | "profile"
}

export interface RefreshScope {
  readonly _tag: "Refresh"
  readonly text: string
  readonly name: "offline_access" | "online_access"
}

export interface UnknownScope {
  readonly _tag: "Unknown"
  readonly text: string
  readonly reason: string
}

export type Scope = ResourceScope | LaunchScope | IdentityScope | RefreshScope | UnknownScope

const v1Permissions: Record<string, ReadonlyArray<Permission>> = {
  read: ["r", "s"],
  write: ["c", "u", "d"],
  "*": permissionOrder
}

const resourceScope = /^(patient|user|system)\/([A-Z][A-Za-z]{0,63}|\*)\.([^?]*)(?:\?(.*))?$/s

const unknown = (text: string, reason: string): UnknownScope => ({ _tag: "Unknown", text, reason })

/** The v2 letters as a set, or a reason they are not a permission string. */
const v2Permissions = (letters: string): ReadonlySet<Permission> | string => {
  let next = 0
  const granted = new Set<Permission>()
  for (const letter of letters) {
    const at = permissionOrder.indexOf(letter as Permission, next)
    if (at === -1) {
      return permissionOrder.includes(letter as Permission)
        ? `permission letters come once each, in the order c, r, u, d, s`
        : `"${letter}" is not a permission: v2 scopes use the letters c, r, u, d, s`
    }
    granted.add(permissionOrder[at]!)
    next = at + 1
  }
  return granted.size === 0 ? "a resource scope names at least one permission" : granted
}

/** The pairs of a v2 scope's query, or a reason it cannot be read. */
const queryPairs = (query: string): ReadonlyArray<readonly [string, string]> | string => {
  if (query === "") return "the query after ? is empty"
  const pairs: Array<readonly [string, string]> = []
  for (const part of query.split("&")) {
    const equals = part.indexOf("=")
    if (equals <= 0) return `"${part}" is not a name=value pair`
    let name: string
    let value: string
    try {
      name = decodeURIComponent(part.slice(0, equals).replace(/\+/g, " "))
      value = decodeURIComponent(part.slice(equals + 1).replace(/\+/g, " "))
    } catch {
      return `"${part}" is not correctly percent-encoded`
    }
    if (value === "") return `"${name}" has no value`
    pairs.push([name, value])
  }
  return pairs
}

/** What one scope grants. */
export const parseScope = (text: string): Scope => {
  switch (text) {
    case "launch":
      return { _tag: "Launch", text, context: undefined }
    case "launch/patient":
      return { _tag: "Launch", text, context: "patient" }
    case "launch/encounter":
      return { _tag: "Launch", text, context: "encounter" }
    case "openid":
    case "fhirUser":
    case "profile":
      return { _tag: "Identity", text, name: text }
    case "offline_access":
    case "online_access":
      return { _tag: "Refresh", text, name: text }
  }
  const match = resourceScope.exec(text)
  if (match === null) return unknown(text, "not a SMART scope")
  const [, context, type, permissions, query] = match
  const v1 = v1Permissions[permissions!]
  if (v1 !== undefined) {
    if (query !== undefined) return unknown(text, "a v1 scope (read, write, *) cannot be narrowed by a query")
    return { _tag: "Resource", text, context: context as ScopeContext, type: type!, permissions: new Set(v1), version: 1, query: [] }
  }
  const granted = v2Permissions(permissions!)
  if (typeof granted === "string") return unknown(text, granted)
  const pairs = query === undefined ? [] : queryPairs(query)
  if (typeof pairs === "string") return unknown(text, pairs)
  return { _tag: "Resource", text, context: context as ScopeContext, type: type!, permissions: granted, version: 2, query: pairs }
}

/** The scopes of an OAuth `scope` value (space-separated), in order, each once. */
export const parseScopes = (value: string): ReadonlyArray<Scope> =>
  [...new Set(value.split(" ").filter((text) => text !== ""))].map(parseScope)

/**
 * Whether `scope` grants `permission` on every resource of `type` in `context` (`whole`, the default), or on
 * some of them (`whole: false`: a v2 scope narrowed by a query grants only what its query matches, which the
 * caller must then apply).
 */
export const grants = (
  scope: Scope,
  context: ScopeContext,
  type: string,
  permission: Permission,
  options: { readonly whole?: boolean } = {}
): boolean =>
  scope._tag === "Resource" && scope.context === context && (scope.type === "*" || scope.type === type) &&
  scope.permissions.has(permission) && (options.whole === false || scope.query.length === 0)
