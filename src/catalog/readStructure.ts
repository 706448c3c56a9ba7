/** Compiles a StructureDefinition: the header now, the snapshot elements on first access. */
import type { ElementConstraint, ElementDefinition, ElementSlicing, ElementType, StructureDefinition } from "./definitions.ts"
import { bool, choice, int, type Json, object, objects, str, strings } from "./json.ts"
import type { Source } from "./source.ts"

const kinds = new Set(["primitive-type", "complex-type", "resource", "logical"])

const isKind = (value: string | undefined): value is StructureDefinition["kind"] => value !== undefined && kinds.has(value)

const readType = (json: Json): ElementType | undefined => {
  const code = str(json, "code")
  return code === undefined ? undefined : { code, profile: strings(json, "profile"), targetProfile: strings(json, "targetProfile") }
}

const readConstraint = (json: Json): ElementConstraint | undefined => {
  const key = str(json, "key")
  return key === undefined
    ? undefined
    : { key, severity: str(json, "severity"), human: str(json, "human"), expression: str(json, "expression") }
}

const readSlicing = (json: Json | undefined): ElementSlicing | undefined => {
  if (json === undefined) return undefined
  const discriminator: Array<{ type: string; path: string }> = []
  for (const d of objects(json, "discriminator")) {
    const type = str(d, "type")
    const path = str(d, "path")
    if (type !== undefined && path !== undefined) discriminator.push({ type, path })
  }
  return { discriminator, ordered: bool(json, "ordered"), rules: str(json, "rules") }
}

export const readBinding = (json: Json | undefined) => {
  const strength = json === undefined ? undefined : str(json, "strength")
  return json === undefined || strength === undefined ? undefined : { strength, valueSet: str(json, "valueSet") }
}

const compact = <A>(items: ReadonlyArray<Json>, read: (json: Json) => A | undefined): ReadonlyArray<A> => {
  const out: Array<A> = []
  for (const item of items) {
    const value = read(item)
    if (value !== undefined) out.push(value)
  }
  return out
}

/** An element without a path cannot be placed in the tree and is left out. */
const readElement = (json: Json): ElementDefinition | undefined => {
  const path = str(json, "path")
  if (path === undefined) return undefined
  return {
    id: str(json, "id"),
    path,
    sliceName: str(json, "sliceName"),
    min: int(json, "min"),
    max: str(json, "max"),
    type: compact(objects(json, "type"), readType),
    binding: readBinding(object(json, "binding")),
    constraint: compact(objects(json, "constraint"), readConstraint),
    fixed: choice(json, "fixed"),
    pattern: choice(json, "pattern"),
    contentReference: str(json, "contentReference"),
    slicing: readSlicing(object(json, "slicing")),
    json
  }
}

/** What the catalog keeps of a StructureDefinition from the start; the snapshot is read when asked for. */
export type StructureData = Omit<StructureDefinition, "resource" | "snapshot">

export const readStructureDefinition = (json: Json): StructureData | string => {
  const url = str(json, "url")
  const type = str(json, "type")
  const kind = str(json, "kind")
  const derivation = str(json, "derivation")
  if (url === undefined || url === "") return "StructureDefinition.url is missing"
  if (type === undefined || type === "") return "StructureDefinition.type is missing"
  if (!isKind(kind)) return `StructureDefinition.kind ${JSON.stringify(kind)} is not a FHIR structure kind`
  if (derivation !== undefined && derivation !== "specialization" && derivation !== "constraint") {
    return `StructureDefinition.derivation ${JSON.stringify(derivation)} is not specialization or constraint`
  }
  return {
    url,
    version: str(json, "version"),
    name: str(json, "name"),
    type,
    kind,
    abstract: bool(json, "abstract") ?? false,
    derivation,
    baseDefinition: str(json, "baseDefinition"),
    fhirVersion: str(json, "fhirVersion")
  }
}

const readSnapshot = (json: Json): StructureDefinition["snapshot"] => {
  const snapshotJson = object(json, "snapshot")
  return snapshotJson === undefined ? undefined : { element: compact(objects(snapshotJson, "element"), readElement) }
}

export const structureDefinition = (data: StructureData, source: Source): StructureDefinition => ({
  url: data.url,
  version: data.version,
  name: data.name,
  type: data.type,
  kind: data.kind,
  abstract: data.abstract,
  derivation: data.derivation,
  baseDefinition: data.baseDefinition,
  fhirVersion: data.fhirVersion,
  get resource() {
    return source.json()
  },
  get snapshot() {
    return source.derived("snapshot", readSnapshot)
  }
})
