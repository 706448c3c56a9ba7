/** The R4 catalog for the validation tests, loaded once per file, and helpers to read what validation finds. */
import { beforeAll, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { type Issue, validateResource, type ValidateOptions } from "../../src/validation/Validator.ts"
import { loadR4Conformance } from "../support/r4Examples.ts"

let resources: ReadonlyArray<Record<string, unknown>> | undefined
let catalog: Catalog | undefined

/** The R4 conformance resources, or undefined (the loader prints the notice) when they cannot be had outside CI. */
export const loadResources = async (): Promise<ReadonlyArray<Record<string, unknown>> | undefined> => {
  resources ??= await loadR4Conformance()
  return resources
}

export const loadCatalog = async (): Promise<Catalog | undefined> => {
  if (catalog !== undefined) return catalog
  const loaded = await loadResources()
  catalog = loaded === undefined ? undefined : build(loaded, 1)
  return catalog
}

/** Loads the catalog before the file's tests; `withCatalog(name, body)` skips when it cannot be had. */
export const catalogTests = () => {
  let loaded: Catalog | undefined
  beforeAll(async () => {
    loaded = await loadCatalog()
  }, 300_000)
  return (name: string, body: (c: Catalog) => void | Promise<void>, timeout?: number) =>
    it(name, async (context) => {
      if (loaded === undefined) return context.skip()
      await body(loaded)
    }, timeout)
}

export const errors = (issues: ReadonlyArray<Issue>): ReadonlyArray<Issue> =>
  issues.filter((issue) => issue.severity === "error" || issue.severity === "fatal")

/** The warning every code of a code system the server does not hold (or know) gets: it could not be validated. */
export const notValidated = (issue: Issue): boolean =>
  /could not be validated: this server does not hold the content of the code system|^A definition for CodeSystem '[^']*' could not be found, so the code cannot be validated$/.test(issue.diagnostics)

/**
 * The errors and warnings, leaving out the advice every resource without a narrative gets (dom-6) and the
 * notices on codes of systems the server does not hold (tested on their own).
 */
export const problems = (c: Catalog, resource: unknown, options?: ValidateOptions): ReadonlyArray<Issue> =>
  validateResource(resource, c, options).filter((issue) => issue.severity !== "information" && !issue.diagnostics.includes("dom-6") && !notValidated(issue))

export const narrative = { status: "generated", div: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>' }
