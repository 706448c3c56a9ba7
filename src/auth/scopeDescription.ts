/**
 * What a SMART scope lets an app do, in plain English, for the consent page (SMART App Launch 2.2,
 * "Scopes and Launch Context", hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html). The meaning
 * comes from `parseScope`, so the page describes exactly what the server would grant.
 */
import { type IdentityScope, type LaunchScope, type Permission, parseScope, permissionOrder, type RefreshScope, type ResourceScope } from "./scopes.ts"

const verbs: Record<Permission, string> = { c: "create", r: "read", u: "update", d: "delete", s: "search" }

/** `["create", "read", "search"]` as "create, read and search". */
const list = (words: ReadonlyArray<string>): string =>
  words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`

const capitalised = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1)

/** Whose records of which type: a patient scope is the patient's own, a user scope what the user may see. */
const records = (scope: ResourceScope): string => {
  const every = scope.type === "*"
  switch (scope.context) {
    case "patient":
      return every ? "all your records of every type" : `your ${scope.type} records`
    case "user":
      return every ? "all resources of every type you have access to" : `the ${scope.type} records you have access to`
    case "system":
      return every ? "all resources of every type this system holds" : `all ${scope.type} records this system holds`
  }
}

const resource = (scope: ResourceScope): string => {
  const permissions = permissionOrder.filter((p) => scope.permissions.has(p))
  const what = `${capitalised(list(permissions.map((p) => verbs[p])))} ${records(scope)}`
  if (scope.query.length === 0) return what
  return `${what}, only those matching ${scope.query.map(([name, value]) => `${name}=${value}`).join(" and ")}`
}

/** By the context a launch scope asks for; `ehr` for `launch`, whose context the EHR gives. */
const launch: Record<NonNullable<LaunchScope["context"]> | "ehr", string> = {
  ehr: "Know the patient and encounter open in the EHR session it is launched from",
  patient: "Ask you to choose a patient, and know which patient you chose",
  encounter: "Ask you to choose an encounter, and know which encounter you chose"
}

const identity: Record<IdentityScope["name"], string> = {
  openid: "Confirm that you signed in (OpenID Connect)",
  fhirUser: "Know who you are (your FHIR user record)",
  profile: "Know who you are (your FHIR user record, as earlier SMART versions ask for it)"
}

const refresh: Record<RefreshScope["name"], string> = {
  online_access: "Stay signed in while you are online",
  offline_access: "Keep access when you are offline"
}

/** A plain-English description of what `scope` grants; an unknown scope is said to be refused. */
export const scopeDescription = (text: string): string => {
  const scope = parseScope(text)
  switch (scope._tag) {
    case "Resource":
      return resource(scope)
    case "Launch":
      return launch[scope.context ?? "ehr"]
    case "Identity":
      return identity[scope.name]
    case "Refresh":
      return refresh[scope.name]
    case "Unknown":
      return `Unknown permission (${scope.text}); it will not be granted`
  }
}
