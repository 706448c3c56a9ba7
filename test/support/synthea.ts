/**
 * The Synthea R4 transaction Bundles beside the project (`../shared/data/synthea`, see
 * `../shared/data/README.md`): one patient each, `urn:uuid:` fullUrls, every entry a POST. Tests
 * that need them skip with a notice when the folder is absent, except under CI=true.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const syntheaDir = fileURLToPath(new URL("../../../shared/data/synthea/", import.meta.url))

const present = existsSync(syntheaDir) && readdirSync(syntheaDir).some((file) => file.endsWith(".json"))

export { syntheaEnv, syntheaExtensionDomains, syntheaValidateOptions, syntheaValidation } from "./syntheaExtensions.ts"

/** Skip the Synthea tests: the data is absent and this is not CI (under CI=true they run, and fail). */
export const skipSynthea = !present && process.env["CI"] !== "true"
if (skipSynthea) console.warn(`NOTICE: Synthea tests skipped: no bundles in ../shared/data/synthea (CI=true makes this a failure)`)

export interface Entry {
  readonly fullUrl: string
  readonly resource: Record<string, any>
  readonly request: { readonly method: string; readonly url: string }
}

export interface SyntheaBundle {
  /** The file name, for messages. */
  readonly file: string
  /** The Bundle as read, never changed. */
  readonly bundle: { readonly resourceType: "Bundle"; readonly type: string; readonly entry: ReadonlyArray<Entry> }
  /** The file's text, to send as is. */
  readonly text: string
}

/**
 * The bundles validation refuses, each for defects of the data that the HL7 reference validator reports
 * as errors too (docs/validation.md, "What it finds on the test data"): left out of `loadSynthea`.
 */
export const refusedSynthea: Readonly<Record<string, ReadonlyArray<string>>> = {
  "Isaura_Dietrich_633c1ef2-5e5f-479d-99b4-b5f49e6c33b2.json": [
    "Unknown code 'vital-sign' in the CodeSystem 'http://terminology.hl7.org/CodeSystem/observation-category'",
    "34552-0"
  ]
}

/** Every bundle the server accepts, in file-name order; fails when the folder is absent. */
export const loadSynthea = (): ReadonlyArray<SyntheaBundle> => loadSyntheaFiles().filter(({ file }) => refusedSynthea[file] === undefined)

/** The bundles of `refusedSynthea`. */
export const loadRefusedSynthea = (): ReadonlyArray<SyntheaBundle> => loadSyntheaFiles().filter(({ file }) => refusedSynthea[file] !== undefined)

const loadSyntheaFiles = (): ReadonlyArray<SyntheaBundle> => {
  if (!present) throw new Error(`no Synthea bundles in ${syntheaDir} (see ../shared/data/README.md)`)
  return readdirSync(syntheaDir)
    .filter((file) => file.endsWith(".json"))
    .sort()
    .map((file) => {
      const text = readFileSync(join(syntheaDir, file), "utf8")
      return { file, text, bundle: JSON.parse(text) }
    })
}

/** How many resources of each type the bundles hold. */
export const countByType = (bundles: ReadonlyArray<SyntheaBundle>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const { bundle } of bundles) {
    for (const entry of bundle.entry) counts.set(entry.resource.resourceType, (counts.get(entry.resource.resourceType) ?? 0) + 1)
  }
  return counts
}

/**
 * Every `reference` string in `value`, at any depth (contained resources included), keyed by its
 * path (`subject.reference`, `contained[0].patient.reference`, ...): FHIR keeps array order, so the
 * same path names the same reference in what was sent and what is read back.
 */
export const referencesIn = (value: unknown, path = ""): Map<string, string> => {
  const found = new Map<string, string>()
  const walk = (node: unknown, at: string): void => {
    if (Array.isArray(node)) {
      node.forEach((item, index) => walk(item, `${at}[${index}]`))
    } else if (typeof node === "object" && node !== null) {
      for (const [key, child] of Object.entries(node)) {
        const childPath = at === "" ? key : `${at}.${key}`
        if (key === "reference" && typeof child === "string") found.set(childPath, child)
        else walk(child, childPath)
      }
    }
  }
  walk(value, path)
  return found
}

/**
 * The entries as the server stores them: `urn:uuid:` references of a transaction rewritten to `Type/id`
 * (index rows are taken after that rewrite, and `resolve() is Patient` reads the type from the text).
 */
export const asStored = (entries: ReadonlyArray<Entry>): ReadonlyArray<Record<string, unknown>> => {
  const local = new Map(entries.map((entry) => [entry.fullUrl, `${entry.resource["resourceType"]}/${entry.resource["id"]}`]))
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite)
    if (typeof node !== "object" || node === null) return node
    return Object.fromEntries(Object.entries(node).map(([key, value]) =>
      [key, key === "reference" && typeof value === "string" ? local.get(value) ?? value : rewrite(value)]
    ))
  }
  return entries.map((entry) => rewrite(entry.resource) as Record<string, unknown>)
}
