/**
 * What the R4 model (fhirpath.js's `fhir-context/r4`) says of element paths, for the invariant compiler:
 * whether an element is a choice (`value[x]`, written `valueQuantity`...) and the type its values have.
 */
import r4 from "fhirpath/fhir-context/r4"

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const choicePaths: Readonly<Record<string, unknown>> = r4.choiceTypePaths
const pathTypes: Readonly<Record<string, unknown>> = r4.path2Type
const definedElsewhere: Readonly<Record<string, string>> = r4.pathsDefinedElsewhere

let knownPaths: ReadonlySet<string> | undefined

/** The paths and types that have elements in the model. */
const known = (path: string): boolean =>
  (knownPaths ??= new Set(Object.keys(pathTypes).map((key) => key.slice(0, key.lastIndexOf("."))))).has(path)

const typeCodeOf = (type: unknown): string | undefined =>
  typeof type === "string" ? type : isObject(type) && typeof type["code"] === "string" ? type["code"] : undefined

/** A base given as an element path (`Patient.identifier`) stands for its type (`Identifier`) unless it is a backbone element. */
export const modelBase = (base: string | undefined): string | undefined => {
  if (base === undefined) return undefined
  const normal = definedElsewhere[base] ?? base
  const code = typeCodeOf(pathTypes[normal])
  const path = code === undefined || code === "BackboneElement" || code === "Element" ? normal : code
  return known(path) ? path : undefined
}

/** Where an element leads in the R4 model: whether it is a choice, and the path or type of its values. */
export const step = (path: string | undefined, name: string): { readonly choice: boolean | undefined; readonly path: string | undefined } => {
  if (path === undefined || !known(path)) return { choice: undefined, path: undefined }
  let full = `${path}.${name}`
  full = definedElsewhere[full] ?? full
  if (full in choicePaths) return { choice: true, path: undefined }
  const code = typeCodeOf(pathTypes[full])
  if (code === undefined) return { choice: false, path: undefined }
  return { choice: false, path: code === "BackboneElement" || code === "Element" ? full : code }
}
