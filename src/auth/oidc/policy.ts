/**
 * Who may sign in and who they are on this server, decided from the claims the provider vouched for
 * (docs/smart-oidc.md, "Allowlist" and "Binding the user"). Pure functions: the Upstream gathers the claims
 * (id_token, then userinfo) and asks these.
 *
 * - `allowed_claims`: for every configured claim (AND across claims), the user's value, a string or an array,
 *   must hold one of the listed values (OR within a claim). Values compare as exact strings.
 * - `allowed_email_domains`: the `email` claim's domain, case-insensitive, must be one listed (no
 *   subdomains), and `email_verified` must not be false.
 * - Both set: both must pass.
 * - `fhirUser` (SMART App Launch 2.2, scopes-and-launch-context, "fhirUser"): a reference to the user's
 *   Patient, Practitioner, PractitionerRole, RelatedPerson or Person, relative (`Practitioner/123`) or an
 *   absolute URL ending in one; it is kept relative (`Type/id`).
 */

export type Claims = Readonly<Record<string, unknown>>

/** The resource types a user can be (the fhirUser claim's types). */
export const userResourceTypes: ReadonlySet<string> = new Set([
  "Patient",
  "Practitioner",
  "PractitionerRole",
  "RelatedPerson",
  "Person"
])

/** A FHIR logical id (R4 `id`). */
const idPattern = /^[A-Za-z0-9\-.]{1,64}$/

/** A claim's value as the strings it holds: a string, number or boolean, or an array of them. */
export const claimStrings = (value: unknown): ReadonlyArray<string> => {
  if (typeof value === "string") return [value]
  if (typeof value === "number" || typeof value === "boolean") return [String(value)]
  if (Array.isArray(value)) return value.flatMap((item) => (Array.isArray(item) ? [] : claimStrings(item)))
  return []
}

export interface Allowlist {
  readonly allowedClaims?: Readonly<Record<string, ReadonlyArray<string>>> | undefined
  readonly allowedEmailDomains?: ReadonlyArray<string> | undefined
}

/** Why the allowlist keeps these claims out (for the log); undefined when it lets them in. */
export const allowlistProblem = (claims: Claims, allowlist: Allowlist): string | undefined => {
  for (const [name, allowed] of Object.entries(allowlist.allowedClaims ?? {})) {
    const values = claimStrings(claims[name])
    if (values.length === 0) return `claim ${name} is missing; one of [${allowed.join(", ")}] is required`
    if (!values.some((value) => allowed.includes(value))) {
      return `claim ${name} is [${values.join(", ")}]; one of [${allowed.join(", ")}] is required`
    }
  }
  const domains = allowlist.allowedEmailDomains
  if (domains !== undefined) {
    const email = claims["email"]
    if (typeof email !== "string" || !email.includes("@")) return "claim email is missing; an allowed e-mail domain is required"
    const domain = email.slice(email.lastIndexOf("@") + 1).toLowerCase()
    if (!domains.some((allowed) => allowed.toLowerCase() === domain)) {
      return `e-mail domain ${domain} is not one of [${domains.join(", ")}]`
    }
    // Some providers send the boolean as a string.
    const verified = claims["email_verified"]
    if (verified === false || verified === "false") return `e-mail ${email} is not verified (email_verified is false)`
  }
  return undefined
}

export type FhirUserClaim =
  | { readonly _tag: "Reference"; readonly reference: string }
  | { readonly _tag: "Malformed"; readonly problem: string }

const typeAndId = (type: string | undefined, id: string | undefined): string | undefined =>
  type !== undefined && id !== undefined && userResourceTypes.has(type) && idPattern.test(id) ? `${type}/${id}` : undefined

/** Reads a fhirUser claim: `Type/id`, or an absolute http(s) URL whose path ends in `Type/id`. */
export const readFhirUser = (value: unknown): FhirUserClaim => {
  const malformed = (problem: string): FhirUserClaim => ({ _tag: "Malformed", problem })
  if (typeof value !== "string") return malformed(`the fhirUser claim is a ${Array.isArray(value) ? "list" : typeof value}, not a string`)
  const expected = `a reference to a ${[...userResourceTypes].join(", ")} (Type/id or a URL ending in one)`
  if (/^[a-z][a-z0-9+.-]*:/i.test(value)) {
    let url: URL
    try {
      url = new URL(value)
    } catch {
      return malformed(`the fhirUser claim ${value} is not ${expected}`)
    }
    const segments = url.pathname.split("/")
    const reference = (url.protocol === "https:" || url.protocol === "http:") && url.search === "" && url.hash === ""
      ? typeAndId(segments.at(-2), segments.at(-1))
      : undefined
    return reference === undefined ? malformed(`the fhirUser claim ${value} is not ${expected}`) : { _tag: "Reference", reference }
  }
  const parts = value.split("/")
  const reference = parts.length === 2 ? typeAndId(parts[0], parts[1]) : undefined
  return reference === undefined ? malformed(`the fhirUser claim ${value} is not ${expected}`) : { _tag: "Reference", reference }
}

/** The patient id of a `Patient/<id>` fhirUser, else undefined. */
export const patientOf = (fhirUser: string | undefined): string | undefined =>
  fhirUser?.startsWith("Patient/") === true ? fhirUser.slice("Patient/".length) : undefined

/** A display name: `name`, else given and family names joined. */
export const displayName = (claims: Claims): string | undefined => {
  const name = claims["name"]
  if (typeof name === "string" && name.trim() !== "") return name
  const parts = [claims["given_name"], claims["family_name"]].filter((p): p is string => typeof p === "string" && p !== "")
  return parts.length === 0 ? undefined : parts.join(" ")
}
