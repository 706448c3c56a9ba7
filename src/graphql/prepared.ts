/**
 * A query as it is run: parsed, FHIR GraphQL's literals written as strings (literals.ts) and validated against the
 * schema with the depth bound (bounds.ts). What that gives depends only on the query's text and the schema, so it
 * is kept per schema for the queries asked again (an app asks the same few queries with other variables): the most
 * recently used 256 of at most 16 KiB each.
 */
import { type DocumentNode, type GraphQLError, type GraphQLSchema, parse, specifiedRules, validate } from "graphql"
import { depthLimit } from "./bounds.ts"
import { stated } from "./errors.ts"
import { fhirLiterals } from "./literals.ts"

export interface Prepared {
  /** The document to execute; undefined when the text cannot be read as one. */
  readonly document: DocumentNode | undefined
  /** Why it cannot be run (a syntax error, what validation found), or none. */
  readonly errors: ReadonlyArray<GraphQLError>
}

const kept = 256
const largestKept = 16 * 1024

const caches = new WeakMap<GraphQLSchema, Map<string, Prepared>>()

const prepareAnew = (schema: GraphQLSchema, query: string): Prepared => {
  try {
    const document = fhirLiterals(schema, parse(query))
    return { document, errors: validate(schema, document, [...specifiedRules, depthLimit]) }
  } catch (error) {
    return { document: undefined, errors: [stated(error)] }
  }
}

/** The query `query` prepared for `schema`, from the cache when it was asked before. */
export const prepare = (schema: GraphQLSchema, query: string): Prepared => {
  let cache = caches.get(schema)
  if (cache === undefined) {
    cache = new Map()
    caches.set(schema, cache)
  }
  const known = cache.get(query)
  if (known !== undefined) {
    // Most recently used last: the first is the one to leave when the cache is full.
    cache.delete(query)
    cache.set(query, known)
    return known
  }
  const prepared = prepareAnew(schema, query)
  if (query.length <= largestKept) {
    if (cache.size >= kept) cache.delete(cache.keys().next().value!)
    cache.set(query, prepared)
  }
  return prepared
}
