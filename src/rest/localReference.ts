/**
 * A literal reference to a resource of this server (https://hl7.org/fhir/R4/references.html#literal): `Type/id`, or
 * the same under this server's `[base]`. Versioned, conditional, contained (`#id`) and other servers' references
 * are not.
 */

const form = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/

/** The type and id `reference` names on the server at `base`, or undefined when it is not such a reference. */
export const localReference = (reference: string, base: string): { readonly type: string; readonly id: string } | undefined => {
  const relative = reference.startsWith(`${base}/`) ? reference.slice(base.length + 1) : reference
  const match = form.exec(relative)
  return match === null ? undefined : { type: match[1]!, id: match[2]! }
}
