/**
 * What the server needs of the FHIR conformance resources, as small read-only shapes. Each reaches the
 * parsed JSON it came from (`resource`, `json`) for the rare field not modelled here; nothing is copied.
 * Optional FHIR fields are `T | undefined`.
 */
import type { Json } from "./json.ts"

/** A resource that could not be compiled, and why: the catalog skips it. */
export interface CatalogProblem {
  readonly resourceType: string | undefined
  readonly id: string | undefined
  readonly url: string | undefined
  readonly message: string
}

/** The common part of every canonical resource the catalog keeps. */
export interface CanonicalDef {
  readonly url: string
  readonly version: string | undefined
  readonly name: string | undefined
  /**
   * The resource's JSON, read when asked for. From the database (stored.ts) it lacks the narrative
   * (`text`), and it may be a fresh copy on each access once other resources have been read since.
   */
  readonly resource: Json
}

// https://hl7.org/fhir/R4/elementdefinition.html
export interface ElementType {
  readonly code: string
  readonly profile: ReadonlyArray<string>
  readonly targetProfile: ReadonlyArray<string>
}

export interface ElementConstraint {
  readonly key: string
  readonly severity: string | undefined
  readonly human: string | undefined
  readonly expression: string | undefined
}

export interface ElementSlicing {
  readonly discriminator: ReadonlyArray<{ readonly type: string; readonly path: string }>
  readonly ordered: boolean | undefined
  readonly rules: string | undefined
}

export interface ElementDefinition {
  readonly id: string | undefined
  readonly path: string
  readonly sliceName: string | undefined
  readonly min: number | undefined
  readonly max: string | undefined
  readonly type: ReadonlyArray<ElementType>
  readonly binding: { readonly strength: string; readonly valueSet: string | undefined } | undefined
  readonly constraint: ReadonlyArray<ElementConstraint>
  /** `fixed[x]` and `pattern[x]`, as given. */
  readonly fixed: unknown
  readonly pattern: unknown
  readonly contentReference: string | undefined
  readonly slicing: ElementSlicing | undefined
  readonly json: Json
}

// https://hl7.org/fhir/R4/structuredefinition.html
export interface StructureDefinition extends CanonicalDef {
  readonly type: string
  readonly kind: "primitive-type" | "complex-type" | "resource" | "logical"
  readonly abstract: boolean
  readonly derivation: "specialization" | "constraint" | undefined
  readonly baseDefinition: string | undefined
  readonly fhirVersion: string | undefined
  /** Read from the JSON on first access. */
  readonly snapshot: { readonly element: ReadonlyArray<ElementDefinition> } | undefined
}

// https://hl7.org/fhir/R4/searchparameter.html
export type SearchParamType = "number" | "date" | "string" | "token" | "reference" | "composite" | "quantity" | "uri" | "special"

export interface SearchParameterDef extends CanonicalDef {
  readonly code: string
  readonly base: ReadonlyArray<string>
  readonly type: SearchParamType
  readonly expression: string | undefined
  readonly target: ReadonlyArray<string>
  readonly modifiers: ReadonlyArray<string>
  readonly comparators: ReadonlyArray<string>
  /** Absent in the resource reads as true: R4 leaves the default open and its own parameters rely on it. */
  readonly multipleOr: boolean
  readonly multipleAnd: boolean
  readonly chain: ReadonlyArray<string>
  readonly components: ReadonlyArray<{ readonly definition: string; readonly expression: string }>
}

// https://hl7.org/fhir/R4/compartmentdefinition.html
export interface CompartmentDef extends CanonicalDef {
  readonly code: string
  readonly search: boolean
  /** Resource type to the parameters that link it to the compartment; types without parameters are not in it. */
  readonly resources: ReadonlyMap<string, ReadonlyArray<string>>
}

// https://hl7.org/fhir/R4/operationdefinition.html
export interface OperationParameterDef {
  readonly name: string
  readonly use: "in" | "out"
  readonly min: number
  readonly max: string
  readonly type: string | undefined
  readonly searchType: string | undefined
  readonly targetProfile: ReadonlyArray<string>
  readonly binding: { readonly strength: string; readonly valueSet: string | undefined } | undefined
  readonly part: ReadonlyArray<OperationParameterDef>
}

export type OperationLevel = "system" | "type" | "instance"

export interface OperationDef extends CanonicalDef {
  readonly code: string
  readonly kind: "operation" | "query"
  readonly system: boolean
  readonly type: boolean
  readonly instance: boolean
  /** `Resource` means every resource type. */
  readonly resourceTypes: ReadonlyArray<string>
  readonly affectsState: boolean | undefined
  readonly parameters: ReadonlyArray<OperationParameterDef>
}

// https://hl7.org/fhir/R4/codesystem.html
export interface ConceptDef {
  readonly code: string
  readonly display: string | undefined
  readonly definition: string | undefined
  readonly parents: ReadonlyArray<string>
  readonly children: ReadonlyArray<string>
  readonly json: Json
}

export interface CodeSystemDef extends CanonicalDef {
  readonly content: string | undefined
  readonly caseSensitive: boolean | undefined
  readonly hierarchyMeaning: string | undefined
  readonly valueSet: string | undefined
  /** Every concept of the flattened hierarchy, in document order; indexed on first use. */
  readonly concepts: () => ReadonlyArray<ConceptDef>
  readonly concept: (code: string) => ConceptDef | undefined
}

// https://hl7.org/fhir/R4/valueset.html
export interface ValueSetFilter {
  readonly property: string
  readonly op: string
  readonly value: string
}

export interface ValueSetInclude {
  readonly system: string | undefined
  readonly version: string | undefined
  readonly concept: ReadonlyArray<{ readonly code: string; readonly display: string | undefined }>
  readonly filter: ReadonlyArray<ValueSetFilter>
  readonly valueSet: ReadonlyArray<string>
}

export interface ValueSetDef extends CanonicalDef {
  /** Read from the JSON on first access. */
  readonly compose: { readonly include: ReadonlyArray<ValueSetInclude>; readonly exclude: ReadonlyArray<ValueSetInclude> } | undefined
  readonly hasExpansion: boolean
}

// https://hl7.org/fhir/R4/conceptmap.html
/** A `dependsOn` or `product` of a map's target: another element's value the mapping depends on or produces. */
export interface ConceptMapOtherElement {
  readonly property: string
  readonly system: string | undefined
  readonly value: string
  readonly display: string | undefined
}

export interface ConceptMapTarget {
  /** Absent when the equivalence is `unmatched`. */
  readonly code: string | undefined
  readonly display: string | undefined
  readonly equivalence: string
  readonly comment: string | undefined
  readonly dependsOn: ReadonlyArray<ConceptMapOtherElement>
  readonly product: ReadonlyArray<ConceptMapOtherElement>
}

export interface ConceptMapElement {
  readonly code: string | undefined
  readonly display: string | undefined
  readonly target: ReadonlyArray<ConceptMapTarget>
}

export interface ConceptMapGroup {
  readonly source: string | undefined
  readonly sourceVersion: string | undefined
  readonly target: string | undefined
  readonly targetVersion: string | undefined
  readonly element: ReadonlyArray<ConceptMapElement>
  /** What to do with a source code the group does not map (`provided`, `fixed` with a code, `other-map` with a url). */
  readonly unmapped: { readonly mode: string; readonly code: string | undefined; readonly display: string | undefined; readonly url: string | undefined } | undefined
}

export interface ConceptMapDef extends CanonicalDef {
  /** The source value set (`sourceUri` or `sourceCanonical`), as written. */
  readonly source: string | undefined
  /** The target value set (`targetUri` or `targetCanonical`), as written. */
  readonly target: string | undefined
  /** The code systems each group maps from and to: which maps a code may be in, without reading them. */
  readonly systems: ReadonlyArray<{ readonly source: string | undefined; readonly target: string | undefined }>
  /** Read from the JSON on first access. */
  readonly groups: ReadonlyArray<ConceptMapGroup>
}
