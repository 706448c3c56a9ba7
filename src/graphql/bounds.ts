/**
 * The bounds of one GraphQL query (docs/graphql.md, "Bounds"), so that no query can exhaust the server: the depth of
 * its selections (`maxDepth`, checked before it runs, as a validation rule) and the resources it resolves in all
 * (`maxResources`: reads, search matches and references, counted as they resolve; past it, each further field that
 * would resolve one is an error).
 */
import {
  type ASTVisitor,
  type FragmentDefinitionNode,
  GraphQLError,
  Kind,
  type SelectionSetNode,
  type ValidationContext
} from "graphql"
import { FieldError } from "./errors.ts"

/** The deepest a query's fields may nest: `{ Patient(id: ...) { name { family } } }` is 3 deep. */
export const maxDepth = 15

/** The most resources one query may resolve. */
export const maxResources = 10_000

/** How deep a selection set nests (fragments followed, each once on a path, so that a cycle cannot loop). */
const depthOf = (
  selections: SelectionSetNode | undefined,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  seen: ReadonlySet<string>
): number => {
  if (selections === undefined) return 0
  let deepest = 0
  for (const selection of selections.selections) {
    if (selection.kind === Kind.FIELD) {
      deepest = Math.max(deepest, 1 + depthOf(selection.selectionSet, fragments, seen))
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      deepest = Math.max(deepest, depthOf(selection.selectionSet, fragments, seen))
    } else {
      const name = selection.name.value
      const fragment = fragments.get(name)
      if (fragment !== undefined && !seen.has(name)) deepest = Math.max(deepest, depthOf(fragment.selectionSet, fragments, new Set([...seen, name])))
    }
  }
  return deepest
}

/** A validation rule: an operation whose fields nest deeper than `maxDepth` is refused before it runs. */
export const depthLimit = (context: ValidationContext): ASTVisitor => {
  const fragments = new Map(context.getDocument().definitions.flatMap((definition) =>
    definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : []
  ))
  return {
    OperationDefinition(operation) {
      const depth = depthOf(operation.selectionSet, fragments, new Set())
      if (depth > maxDepth) {
        context.reportError(new GraphQLError(`The query nests its fields ${depth} deep; at most ${maxDepth} are allowed`, { nodes: operation }))
      }
    }
  }
}

/** The count of one query's resolved resources: `take(n)` fails once the query would pass `maxResources`. */
export const resourceBudget = (limit = maxResources) => {
  let used = 0
  return {
    take: (count: number): void => {
      used += count
      if (used > limit) throw new FieldError(`The query resolves more than ${limit} resources; ask for fewer (a smaller _count, fewer references)`, "too-costly")
    }
  }
}
