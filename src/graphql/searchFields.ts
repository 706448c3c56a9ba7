/**
 * The fields that search (FHIR R4 graphql.html, "Searching resources" and "Reverse References"):
 *
 * - `TypeList(params)` on the query root: every match, as a list. Without `_count` a list holds at most
 *   `maxListed` matches and a search that matches more is an error (the page says a server SHALL NOT cut a list
 *   short silently); with `_count` (and `_offset`) it is that window of the matches.
 * - `TypeConnection(params)`: one page, as a connection: `count` (the matches in all), `offset`, `pagesize`,
 *   `edges { mode score resource }`, and the cursors `first`, `previous`, `next`, `last`, which a later
 *   `TypeConnection(_cursor: ...)` follows (a cursor carries its search; no other argument goes with it).
 * - On every resource, `SourceList(_reference: param, ...)` and `SourceConnection(_reference: param, ...)`: the
 *   resources of type Source whose reference search parameter `param` points at this resource.
 *
 * Arguments are the type's search parameters (a `-` written `_`), each value as a search URL writes it, read by
 * the same parser as a REST search and never leniently; `_filter`, `_sort`, `_count`, `_offset`, and `fhirpath`,
 * an expression each match of the page must be true of. A reverse reference takes `_reference`, `_filter`,
 * `_sort`, `_count`, `_offset` and `fhirpath`: its other conditions go in `_filter` (every resource type has many
 * types that refer to it, each with its own parameters; giving each of those fields all of them would make the
 * schema some fifty times larger for what `_filter` says as well).
 */
import {
  type FieldNode,
  type GraphQLFieldConfig,
  GraphQLFloat,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLResolveInfo,
  GraphQLString,
  Kind,
  type SelectionSetNode
} from "graphql"
import type { Catalog } from "../catalog/Catalog.ts"
import { recordSlice, type SliceKeys } from "./directives.ts"
import { FieldError } from "./errors.ts"
import { whereTrue } from "./listFilters.ts"

/** One page of a search, as a GraphQL field reads it (GraphQLContext.search). */
export interface SearchPage {
  readonly matches: ReadonlyArray<Record<string, unknown>>
  /** The matches in all, when the search was asked to count them (`_total=accurate`). */
  readonly total: number | undefined
  /** The page size asked for (`_count`, 20 by default). */
  readonly count: number
  /** The page's offset, when it was asked for by offset (not by a cursor). */
  readonly offset: number | undefined
  /** The pages this one links to: each relation with the search's query at that position. */
  readonly links: ReadonlyArray<{ readonly relation: string; readonly query: string }>
}

/** The context the search fields need (a part of GraphQLContext). */
export interface Searching {
  readonly search: (type: string, params: URLSearchParams) => Promise<SearchPage>
  /** Where `@slice` on a list records its names (directives.ts). */
  readonly slices: SliceKeys
}

/** The most matches of a `TypeList` without `_count`. */
export const maxListed = 1000

/** What a connection's fields are resolved from. */
interface ConnectionValue {
  readonly type: string
  readonly page: SearchPage
  readonly fhirpath: string | undefined
}

const identifier = /^[_A-Za-z][_0-9A-Za-z]*$/

/** The arguments of a type's search: its search parameters, a `-` in a name written `_`, each by the code it stands for. */
export const searchArguments = (catalog: Catalog, type: string): ReadonlyMap<string, string> => {
  const names = new Map<string, string>()
  for (const code of [...catalog.searchParameters(type).keys(), "_filter", "_sort", "_count", "_offset"]) {
    const name = code.replace(/-/g, "_")
    if (identifier.test(name) && !names.has(name)) names.set(name, code)
  }
  return names
}

const intArguments = new Set(["_count", "_offset"])

/** A cursor: the type searched and the search's query at a page, opaque to the client. */
const cursorOf = (type: string, query: string): string => Buffer.from(`${type}?${query}`, "utf8").toString("base64url")

/** The search a cursor of `type` carries, or an error saying it is not one. */
const readCursor = (type: string, cursor: string): URLSearchParams => {
  const text = Buffer.from(cursor, "base64url").toString("utf8")
  if (!text.startsWith(`${type}?`)) throw new Error(`_cursor is not a cursor of a ${type} search (give the first, previous, next or last of a ${type}Connection)`)
  return new URLSearchParams(text.slice(type.length + 1))
}

/** The search parameters the arguments give (`fhirpath`, `_cursor` and `_reference` are not search parameters). */
const paramsOf = (names: ReadonlyMap<string, string>, args: Readonly<Record<string, unknown>>): URLSearchParams => {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(args)) {
    const code = names.get(name)
    if (code !== undefined && value !== undefined && value !== null) params.append(code, String(value))
  }
  return params
}

/** Whether a field's selections ask for `name` (fragments followed). */
const selects = (info: GraphQLResolveInfo, name: string): boolean => {
  const within = (set: SelectionSetNode | undefined, seen: Set<string>): boolean =>
    set?.selections.some((selection) => {
      if (selection.kind === Kind.FIELD) return selection.name.value === name
      if (selection.kind === Kind.INLINE_FRAGMENT) return within(selection.selectionSet, seen)
      const fragment = info.fragments[selection.name.value]
      if (fragment === undefined || seen.has(selection.name.value)) return false
      seen.add(selection.name.value)
      return within(fragment.selectionSet, seen)
    }) ?? false
  return info.fieldNodes.some((node: FieldNode) => within(node.selectionSet, new Set()))
}

/** Reads a list: all matches up to `maxListed` (an error past it), or the window `_count` asks for. */
const listOf = async (type: string, context: Searching, params: URLSearchParams, fhirpath: unknown, info: GraphQLResolveInfo) => {
  const windowed = params.has("_count")
  if (!windowed) params.set("_count", String(maxListed))
  const page = await context.search(type, params)
  if (!windowed && page.links.some((link) => link.relation === "next")) {
    throw new FieldError(
      `the search matches more than ${maxListed} ${type} resources: narrow it, ask for a window with _count and _offset, or page through it with ${type}Connection`,
      "too-costly"
    )
  }
  const matches = whereTrue(page.matches, fhirpath as string | undefined)
  recordSlice(info, matches, context.slices)
  return matches
}

/** Reads a connection's page (counting the matches only when `count` or `last` is asked for). */
const connectionOf = async (type: string, context: Searching, params: URLSearchParams, fhirpath: unknown, info: GraphQLResolveInfo): Promise<ConnectionValue> => {
  if (selects(info, "count") || selects(info, "last")) params.set("_total", "accurate")
  return { type, page: await context.search(type, params), fhirpath: (fhirpath ?? undefined) as string | undefined }
}

/** Builds the search fields of a catalog's types; `objectType` gives the output type of a resource type. */
export const searchFields = (catalog: Catalog, objectType: (type: string) => GraphQLObjectType) => {
  const connectionTypes = new Map<string, GraphQLObjectType>()

  /** `TypeConnection`'s type: the page, its cursors and its edges. */
  const connectionType = (type: string): GraphQLObjectType => {
    const known = connectionTypes.get(type)
    if (known !== undefined) return known
    const edge = new GraphQLObjectType<Record<string, unknown>>({
      name: `${type}Edge`,
      description: `A match of a ${type} search (as Bundle.entry.search says it)`,
      fields: () => ({
        mode: { type: GraphQLString, description: "match" },
        score: { type: GraphQLFloat, description: "Not given: searches here are not ranked" },
        resource: { type: objectType(type) }
      })
    })
    const link = (relation: string): GraphQLFieldConfig<ConnectionValue, unknown> => ({
      type: GraphQLString,
      description: `The cursor of the ${relation} page (give it as _cursor to ${type}Connection), null when there is none`,
      resolve: ({ page }) => {
        const found = page.links.find((candidate) => candidate.relation === relation)
        return found === undefined ? null : cursorOf(type, found.query)
      }
    })
    const made = new GraphQLObjectType<ConnectionValue>({
      name: `${type}Connection`,
      description: `A page of a ${type} search`,
      fields: () => ({
        count: { type: GraphQLInt, description: "The matches in all", resolve: ({ page }) => page.total ?? null },
        offset: { type: GraphQLInt, description: "The page's offset (null for a page reached by a cursor)", resolve: ({ page }) => page.offset ?? null },
        pagesize: { type: GraphQLInt, description: "The page size asked for", resolve: ({ page }) => page.count },
        first: link("first"),
        previous: link("previous"),
        next: link("next"),
        last: link("last"),
        edges: {
          type: new GraphQLList(edge),
          resolve: ({ page, fhirpath }) => whereTrue(page.matches, fhirpath).map((resource) => ({ mode: "match", score: null, resource }))
        }
      })
    })
    connectionTypes.set(type, made)
    return made
  }

  const argumentsOf = (names: ReadonlyMap<string, string>) =>
    Object.fromEntries([...names.keys()].map((name) => [name, { type: intArguments.has(name) ? GraphQLInt : GraphQLString }]))

  const fhirpathArgument = { fhirpath: { type: GraphQLString, description: "A FHIRPath expression each match must be true of" } }

  /** `TypeList(...)` on the query root. */
  const list = (type: string): GraphQLFieldConfig<unknown, Searching, Record<string, unknown>> => {
    const names = searchArguments(catalog, type)
    return {
      type: new GraphQLList(objectType(type)),
      description: `The ${type} resources a search matches (FHIR GraphQL, list)`,
      args: { ...argumentsOf(names), ...fhirpathArgument },
      resolve: (_root, args, context, info) => listOf(type, context, paramsOf(names, args), args["fhirpath"], info)
    }
  }

  /** `TypeConnection(...)` on the query root. */
  const connection = (type: string): GraphQLFieldConfig<unknown, Searching, Record<string, unknown>> => {
    const names = searchArguments(catalog, type)
    return {
      type: connectionType(type),
      description: `A page of a ${type} search, with cursors to the others (FHIR GraphQL, connection)`,
      args: { ...argumentsOf(names), ...fhirpathArgument, _cursor: { type: GraphQLString, description: "A cursor of an earlier page: the search it carries, at its page" } },
      resolve: (_root, args, context, info) => {
        const cursor = args["_cursor"]
        if (typeof cursor !== "string") return connectionOf(type, context, paramsOf(names, args), args["fhirpath"], info)
        const others = Object.entries(args).filter(([name, value]) => name !== "_cursor" && name !== "fhirpath" && value !== undefined && value !== null)
        if (others.length > 0) throw new Error(`a cursor carries its search: give _cursor alone, not with ${others.map(([name]) => name).join(", ")}`)
        return connectionOf(type, context, readCursor(type, cursor), args["fhirpath"], info)
      }
    }
  }

  /** Each resource type's referring types: the reference search parameters of each that may point at it. */
  const referrers = new Map<string, Map<string, Array<string>>>()
  for (const source of catalog.resourceTypes) {
    for (const [code, param] of catalog.searchParameters(source)) {
      if (param.type !== "reference" || !identifier.test(`${source}List`)) continue
      for (const target of param.target) {
        const bySource = referrers.get(target) ?? new Map<string, Array<string>>()
        referrers.set(target, bySource)
        bySource.set(source, [...(bySource.get(source) ?? []), code])
      }
    }
  }

  const reverseNames: ReadonlyMap<string, string> = new Map([["_filter", "_filter"], ["_sort", "_sort"], ["_count", "_count"], ["_offset", "_offset"]])

  /** The search of `source` that `_reference` asks for, of the resource `focus`. */
  const reverseParams = (focusType: string, source: string, codes: ReadonlyArray<string>, focus: Record<string, unknown>, args: Readonly<Record<string, unknown>>) => {
    const code = String(args["_reference"])
    if (!codes.includes(code)) {
      throw new Error(`_reference: '${code}' is not a search parameter of ${source} that refers to ${focusType} (it is one of ${codes.join(", ")})`)
    }
    const id = focus["id"]
    if (typeof id !== "string") throw new Error(`a ${focusType} without an id (a contained resource) has nothing that refers to it`)
    const params = paramsOf(reverseNames, args)
    params.append(code, `${focusType}/${id}`)
    return params
  }

  /** The reverse-reference fields of a resource type: `SourceList` and `SourceConnection` for each type that may refer to it. */
  const reverse = (focusType: string): Record<string, GraphQLFieldConfig<Record<string, unknown>, Searching, Record<string, unknown>>> => {
    const fields: Record<string, GraphQLFieldConfig<Record<string, unknown>, Searching, Record<string, unknown>>> = {}
    for (const [source, codes] of referrers.get(focusType) ?? []) {
      const args = {
        _reference: { type: new GraphQLNonNull(GraphQLString), description: `The search parameter of ${source} that refers to this ${focusType}: ${codes.join(", ")}` },
        ...argumentsOf(reverseNames),
        ...fhirpathArgument
      }
      fields[`${source}List`] = {
        type: new GraphQLList(objectType(source)),
        description: `The ${source} resources that refer to this one (FHIR GraphQL, reverse reference)`,
        args,
        resolve: (focus, given, context, info) => listOf(source, context, reverseParams(focusType, source, codes, focus, given), given["fhirpath"], info)
      }
      fields[`${source}Connection`] = {
        type: connectionType(source),
        description: `A page of the ${source} resources that refer to this one (FHIR GraphQL, reverse reference)`,
        args,
        resolve: (focus, given, context, info) => connectionOf(source, context, reverseParams(focusType, source, codes, focus, given), given["fhirpath"], info)
      }
    }
    return fields
  }

  return { list, connection, reverse }
}
