/** What the fetcher hands the installer. */

export interface PackageResource {
  /** The file name inside the package folder, e.g. `StructureDefinition-Patient.json`. */
  readonly file: string
  readonly resource: Record<string, unknown>
}

export interface LoadedPackage {
  readonly name: string
  readonly version: string
  /** Where it came from, human-readable, no secrets: "registry https://…", "cache", "file ./x.tgz". */
  readonly source: string
  /** sha256 of the tarball, or of the sorted file contents for a directory. */
  readonly checksum: string
  /** The package.json. */
  readonly manifest: Record<string, unknown>
  /** Every `*.json` directly in `package/` with a `resourceType` (package.json and .index.json excluded). */
  readonly resources: ReadonlyArray<PackageResource>
  /** Set when another package stood in for this one, e.g. "hl7.fhir.r4.examples@4.0.1" for the R4 core. */
  readonly substitutedFrom?: string
}

/** A dependency no source has, or one already loaded at another version: reported, not fatal. */
export interface PackageWarning {
  readonly package: string
  readonly requiredBy: string
  readonly message: string
}

export interface FetchResult {
  /** In dependency order: every package comes after the packages it depends on. */
  readonly packages: ReadonlyArray<LoadedPackage>
  readonly warnings: ReadonlyArray<PackageWarning>
}

/**
 * Whether a resource of the R4 examples package is one the R4 core package holds too, when the examples package
 * stands in for the core: its SearchParameters named `example...` are examples of SearchParameter, not the
 * core's, and would stand in for core parameters of the same code (`example` is `_id` of every resource,
 * `example-reference` is Condition's `subject`, limited to Organization).
 */
export const inCore = (resource: Record<string, unknown>): boolean =>
  !(resource["resourceType"] === "SearchParameter" && typeof resource["id"] === "string" && resource["id"].startsWith("example"))

/** The R4 core package's conformance resources, as carried by the R4 examples package. */
export const conformanceTypes: ReadonlySet<string> = new Set([
  "StructureDefinition",
  "SearchParameter",
  "CompartmentDefinition",
  "OperationDefinition",
  "CodeSystem",
  "ValueSet",
  "ConceptMap",
  "NamingSystem",
  "CapabilityStatement"
])
