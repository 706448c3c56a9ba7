/**
 * Rules on URIs beyond the regexes of the uri, url, canonical, oid and uuid types
 * (https://hl7.org/fhir/R4/datatypes.html#uri, #canonical, #oid, #uuid), and on Identifier.system
 * (https://hl7.org/fhir/R4/datatypes.html#Identifier):
 * - `oid:` and `uuid:` are not URI schemes: `urn:oid:` and `urn:uuid:` are.
 * - a `urn:uuid:` holds a UUID in lowercase hex; a `urn:oid:` a well-formed OID;
 * - a canonical is absolute, or a `#fragment` naming a contained resource (a warning: see below);
 * - the defining url of a canonical resource (`ValueSet.url`...) is absolute, in a contained resource too
 *   (https://hl7.org/fhir/R4/resource.html#canonical);
 * - Identifier.system is an absolute URI (http:, https:, urn:, or ldap:); with `urn:ietf:rfc:3986` the value
 *   is itself an absolute URI (https://hl7.org/fhir/R4/identifier-registry.html).
 */
import type { Json } from "../catalog/json.ts"
import type { Severity } from "./Issue.ts"
import { canonicalResourceTypes } from "./canonical.ts"

export interface UriProblem {
  readonly severity: "error" | "warning"
  readonly diagnostics: string
}

const token = /^[A-Za-z][A-Za-z0-9_[\]]*$/
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const oidArcs = /^[0-2](\.(0|[1-9][0-9]*))+$/

/**
 * Whether a URI is absolute as the HL7 reference validator judges it: a scheme (http, https, urn, or a
 * lowercase token), a colon, and a non-empty rest without spaces.
 */
export const isAbsoluteUri = (uri: string): boolean => {
  const colon = uri.indexOf(":")
  if (colon <= 0 || colon === uri.length - 1) return false
  const scheme = uri.slice(0, colon)
  if (uri.includes(" ", colon)) return false
  return token.test(scheme) && scheme === scheme.toLowerCase()
}

/** Why an OID (without `urn:oid:`) is not one; root arcs that short are almost never an assigned namespace. */
const oidProblem = (oid: string): boolean => !oidArcs.test(oid) || (oid.lastIndexOf(".") < 4 && !oid.startsWith("1.3"))

/** Whether an element (by its path) is the defining url of a canonical resource: `ValueSet.url`. */
export const isDefiningUrl = (path: string): boolean => {
  const dot = path.indexOf(".")
  return dot > 0 && path.length === dot + 4 && path.endsWith(".url") && canonicalResourceTypes.has(path.slice(0, dot))
}

/**
 * The problems of a uri, url, canonical, oid or uuid value that its regex let through. `defining` when the
 * element is a canonical resource's own url, `contained` when that resource is contained.
 */
export const uriProblems = (code: string, value: string, defining: boolean, contained: boolean): ReadonlyArray<UriProblem> => {
  const problems: Array<UriProblem> = []
  if (value.startsWith("oid:")) problems.push({ severity: "error", diagnostics: `URI values cannot start with oid: ('${value}'): write urn:oid:` })
  if (value.startsWith("uuid:")) problems.push({ severity: "error", diagnostics: `URI values cannot start with uuid: ('${value}'): write urn:uuid:` })
  // R4's own examples refer to canonical resources as `Library/x` dozens of times, and a server can read
  // that against its own base: a warning, where the reference validator has an error.
  if (code === "canonical" && !defining && !value.startsWith("#") && !isAbsoluteUri(value)) {
    problems.push({ severity: "warning", diagnostics: `Canonical URLs must be absolute URLs if they are not fragment references (${value})` })
  }
  if (value.startsWith("urn:uuid:")) {
    let rest = value.slice(9)
    const hash = rest.indexOf("#")
    if (hash >= 0) rest = rest.slice(0, hash)
    if (code === "canonical" && rest.includes("|")) rest = rest.slice(0, rest.lastIndexOf("|"))
    if (!uuid.test(rest)) problems.push({ severity: "error", diagnostics: `UUIDs must be valid and lowercase (${rest})` })
  } else if (value.startsWith("urn:oid:")) {
    let rest = value.slice(8)
    if (code === "canonical" && rest.includes("|")) rest = rest.slice(0, rest.indexOf("|"))
    if (oidProblem(rest)) problems.push({ severity: "error", diagnostics: `OIDs must be valid (${rest})` })
  }
  if (defining && !isAbsoluteUri(value)) {
    problems.push({
      severity: "error",
      diagnostics: contained
        ? `Canonical URLs in contained resources must be absolute URLs if present (${value})`
        : `Canonical URLs must be absolute URLs if they are not fragment references (${value})`
    })
  }
  return problems
}

const rfc3986 = "urn:ietf:rfc:3986"
const rfc4122 = "https://tools.ietf.org/html/rfc4122"

/** Identifier.system and, for the URI and UUID systems, Identifier.value. */
export const identifierProblems = (
  value: Json,
  path: string,
  reporter: { report(severity: Severity, code: string, expression: string, diagnostics: string): void }
): void => {
  const system = value["system"]
  if (typeof system !== "string") return
  const id = value["value"]
  if (!/^(https?|urn|ldap):/.test(system)) {
    reporter.report("error", "code-invalid", path, `Identifier.system must be an absolute reference, not a local reference ('${system}')`)
  }
  if (typeof id !== "string") return
  if (system === rfc3986 && !isAbsoluteUri(id)) {
    reporter.report("error", "code-invalid", path,
      `if identifier.system is '${rfc3986}', then the identifier.value must be a full URI (e.g. start with a scheme), not '${id}'`)
  } else if (system === rfc4122) {
    if (id.startsWith("urn:uuid:")) {
      reporter.report("warning", "code-invalid", path, `The system '${rfc4122}' should not be used with the UUID '${id}': use the system '${rfc3986}' instead`)
    } else if (uuid.test(id)) {
      reporter.report("warning", "code-invalid", path, `The system '${rfc4122}' should not be used with the UUID '${id}': write the value as 'urn:uuid:${id}' with the system '${rfc3986}'`)
    } else {
      reporter.report("error", "code-invalid", path, `The system '${rfc4122}' is not correct for the identifier '${id}', which is not a UUID`)
    }
  }
}
