/**
 * The pages a person sees during a SMART App Launch 2.2 authorization (hl7.org/fhir/smart-app-launch/
 * app-launch.html, "Obtain authorization code"): sign-in, the patient picker of a standalone launch asking
 * for `launch/patient`, consent to the scopes asked for, and the error page for a request that cannot be
 * answered by a redirect to the client (RFC 6749, 4.1.2.1: an unknown client or redirect URI).
 *
 * Each page is a complete HTML document rendered on the server: no script, no external resource, one
 * inline style sheet allowed by its hash. Every form posts, and carries the pending authorization's opaque
 * id (`request`) and the caller's CSRF token (`csrf`) as hidden fields. Every value from outside goes
 * through `escapeHtml` (src/auth/html.ts). Send each with `pageHeaders`. Choices for accessibility and
 * security are written down in docs/smart-pages.md.
 */
import { createHash } from "node:crypto"
import { Html, html } from "./html.ts"

export { escapeHtml } from "./html.ts"
export { scopeDescription } from "./scopeDescription.ts"

const styleSheet = `
:root { font-family: system-ui, sans-serif; line-height: 1.5; color: #1b1b1b; background: #fff; }
body { margin: 0; }
main { max-width: 36rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; line-height: 1.25; }
label { font-weight: 600; }
input[type="text"], input[type="search"] { display: block; box-sizing: border-box; width: 100%; margin: .25rem 0 .75rem; padding: .5rem; font: inherit; border: 1px solid #4b5563; border-radius: 4px; }
input[type="checkbox"], input[type="radio"] { width: 1.25rem; height: 1.25rem; margin: .15rem 0 0; flex: none; }
button { font: inherit; padding: .5rem 1.25rem; border: 2px solid #1e3a8a; border-radius: 4px; background: #1e3a8a; color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: #1e3a8a; }
:focus-visible { outline: 3px solid #b45309; outline-offset: 2px; }
fieldset { margin: 1rem 0; padding: .5rem 1rem; border: 1px solid #6b7280; border-radius: 4px; }
legend { padding: 0 .25rem; font-weight: 600; }
.choice { display: flex; gap: .75rem; align-items: flex-start; margin: .75rem 0; }
.choice label { font-weight: 400; }
.detail { display: block; color: #4b5563; font-size: .9rem; }
.notice { padding: .5rem 1rem; border-left: 4px solid #b45309; background: #fffbeb; }
.error { padding: .5rem 1rem; border-left: 4px solid #b91c1c; background: #fef2f2; color: #7f1d1d; }
.actions { display: flex; gap: .75rem; margin-top: 1rem; }
.search { margin-bottom: 1.5rem; }
`

/** The style sheet's CSP hash source: the one style the pages may apply (CSP Level 3, "hash-source"). */
const styleHash = `'sha256-${createHash("sha256").update(styleSheet, "utf8").digest("base64")}'`

/** An origin as a CSP host-source may name it: scheme, host (a name or a bracketed IPv6 address), port. */
const originSource = /^https?:\/\/(?:\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?$/

/** Schemes a redirect must never be allowed to, even when a client registered one. */
const unsafeSchemes = new Set(["javascript:", "data:", "blob:", "filesystem:", "file:"])

/**
 * A CSP `form-action` source for the URL a form's answer may redirect to: its origin for http and https,
 * its scheme for a native app's private-use scheme (RFC 8252, 7.1); nothing for text that is not such a
 * URL, or whose origin the CSP grammar cannot carry (a `;` in a host would start another directive).
 */
const formSource = (target: string): string | undefined => {
  let url: URL
  try {
    url = new URL(target)
  } catch {
    return undefined
  }
  if (url.protocol === "http:" || url.protocol === "https:") return originSource.test(url.origin) ? url.origin : undefined
  return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol) && !unsafeSchemes.has(url.protocol) ? url.protocol : undefined
}

/**
 * The headers every page is sent with. `formTargets` are the URLs a submitted form may be redirected to
 * (the client's redirect URI after consent, the OpenID provider after "sign in with"): browsers apply
 * `form-action` to those redirects too, so each one's origin must be allowed beside the server's own.
 */
export const pageHeaders = (formTargets: ReadonlyArray<string> = []): Record<string, string> => {
  const sources = [...new Set(formTargets.flatMap((target) => formSource(target) ?? []))]
  return {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": [
      "default-src 'none'",
      `style-src ${styleHash}`,
      ["form-action 'self'", ...sources].join(" "),
      "frame-ancestors 'none'",
      "base-uri 'none'"
    ].join("; "),
    "Referrer-Policy": "no-referrer"
  }
}

/** A whole page: `title` names the document (and starts with "Error:" when the page reports one). */
const page = (title: string, body: Html): string =>
  `<!DOCTYPE html>\n${html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<style>${Html.trusted(styleSheet)}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`}`

/** The fields every form carries back: the pending authorization and the CSRF token. */
const hidden = (request: string, csrf: string): Html =>
  html`<input type="hidden" name="request" value="${request}">
<input type="hidden" name="csrf" value="${csrf}">`

/** An error message, announced when the page loads and tied to its field by `id`. */
const alert = (id: string, message: string | undefined): Html =>
  html`${message !== undefined && html`<p id="${id}" class="error" role="alert">${message}</p>`}`

/** The attributes that tie a field to its error message (WCAG 2.2, 3.3.1 "Error Identification"). */
const invalid = (errorId: string, error: string | undefined, describedBy: ReadonlyArray<string> = []): Html => {
  const ids = error === undefined ? describedBy : [...describedBy, errorId]
  return html`${error !== undefined && html` aria-invalid="true"`}${ids.length > 0 && html` aria-describedby="${ids.join(" ")}"`}`
}

const titled = (title: string, error: string | undefined): string => (error === undefined ? title : `Error: ${title}`)

export interface LoginPage {
  readonly action: string
  readonly request: string
  readonly csrf: string
  readonly clientName: string
  readonly error?: string | undefined
  /** The username form of `smart.demo_login`, which verifies nothing: shown only when true, with a notice. */
  readonly demo: boolean
  /** Sign-in with the organisation's OpenID provider: where its form posts and what its button says. */
  readonly oidc?: { readonly action: string; readonly label: string } | undefined
}

/** Sign-in: the demo username form and its notice, and/or the organisation's OpenID provider. */
export const loginPage = (input: LoginPage): string => {
  const { action, request, csrf, clientName, error, demo, oidc } = input
  const demoForm = html`<p class="notice" role="note"><strong>Demonstration sign-in.</strong> This server verifies nothing: any username is accepted and nobody is checked. Do not use it with real patient data.</p>
<form method="post" action="${action}">
${hidden(request, csrf)}
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required${invalid("username-error", error)}>
<button type="submit">Sign in</button>
</form>`
  const oidcForm = oidc !== undefined && html`${demo && html`<p>Or use your organisation's account:</p>`}
<form method="post" action="${oidc.action}">
${hidden(request, csrf)}
<button type="submit">${oidc.label}</button>
</form>`
  return page(titled("Sign in", error), html`<h1>Sign in</h1>
<p>${clientName} asks for access to this FHIR server. Sign in to continue.</p>
${alert("username-error", error)}
${demo && demoForm}
${oidcForm}
${!demo && oidc === undefined && html`<p>No way to sign in is configured on this server.</p>`}`)
}

export interface PickerPatient {
  readonly id: string
  readonly name: string
  readonly birthDate?: string | undefined
  readonly gender?: string | undefined
}

export interface PickerPage {
  readonly action: string
  readonly request: string
  readonly csrf: string
  /** The search text of these results (empty for the first page). */
  readonly query: string
  readonly patients: ReadonlyArray<PickerPatient>
  readonly error?: string | undefined
}

/** "Born 1985-11-02, gender male.": read after the patient's name, as the radio button's description. */
const patientDetails = (patient: PickerPatient): string => {
  const born = patient.birthDate !== undefined ? `Born ${patient.birthDate}` : "Birth date not recorded"
  const gender = patient.gender !== undefined ? `gender ${patient.gender}` : "gender not recorded"
  return `${born}, ${gender}.`
}

/**
 * The patient picker (SMART App Launch 2.2, `launch/patient` in a standalone launch): a search by name,
 * posting `q`, and the patients found as one radio group, posting `patient` (the chosen id).
 */
export const pickerPage = (input: PickerPage): string => {
  const { action, request, csrf, query, patients, error } = input
  const choices = patients.map((patient, i) => html`<div class="choice">
<input type="radio" id="patient-${i}" name="patient" value="${patient.id}" required${invalid("picker-error", error, [`patient-${i}-details`])}>
<div><label for="patient-${i}">${patient.name}</label><span class="detail" id="patient-${i}-details">${patientDetails(patient)}</span></div>
</div>`)
  const results = patients.length === 0
    ? html`<p role="status">${query.trim() === "" ? "No patients found." : `No patients match “${query}”.`}</p>`
    : html`<form method="post" action="${action}">
${hidden(request, csrf)}
<fieldset>
<legend>Choose a patient</legend>
${choices}
</fieldset>
<button type="submit">Continue</button>
</form>`
  return page(titled("Choose a patient", error), html`<h1>Find a patient</h1>
${alert("picker-error", error)}
<form method="post" action="${action}" class="search" role="search">
${hidden(request, csrf)}
<label for="q">Search patients by name</label>
<input type="search" id="q" name="q" value="${query}" autocomplete="off">
<button type="submit">Search</button>
</form>
${results}`)
}

export interface ConsentScope {
  readonly scope: string
  /** What the scope lets the app do (`scopeDescription`). */
  readonly description: string
  /** Granted whenever the request is allowed: shown ticked and unavailable, and sent as a hidden field. */
  readonly required?: boolean | undefined
}

export interface ConsentPage {
  readonly action: string
  readonly request: string
  readonly csrf: string
  readonly clientName: string
  /** The client's home page, shown as a link when it is an http or https URL. */
  readonly clientUri?: string | undefined
  /** The patient whose records the app would see. */
  readonly patient?: { readonly name: string } | undefined
  readonly scopes: ReadonlyArray<ConsentScope>
}

const isWebUrl = (text: string): boolean => {
  try {
    const { protocol } = new URL(text)
    return protocol === "https:" || protocol === "http:"
  } catch {
    return false
  }
}

/**
 * Consent: who asks, for which patient, and one checkbox per scope (ticked) so that the user may grant
 * fewer. Posts `scope` once per ticked scope and `decision`, `allow` or `deny`: Allow comes first, so it is
 * the button Enter presses.
 */
export const consentPage = (input: ConsentPage): string => {
  const { action, request, csrf, clientName, clientUri, patient, scopes } = input
  const site = clientUri !== undefined && isWebUrl(clientUri) &&
    html` (<a href="${clientUri}" rel="noopener noreferrer">${clientUri}</a>)`
  const choices = scopes.map(({ scope, description, required }, i) => html`<div class="choice">
${required === true && html`<input type="hidden" name="scope" value="${scope}">`}
<input type="checkbox" id="scope-${i}" name="scope" value="${scope}" checked${required === true && html` disabled`} aria-describedby="scope-${i}-code">
<div><label for="scope-${i}">${description}${required === true && " (required)"}</label><code class="detail" id="scope-${i}-code">${scope}</code></div>
</div>`)
  return page("Allow access", html`<h1>Allow ${clientName} to access health records?</h1>
<p>${clientName}${site} asks for the permissions below${patient !== undefined && html` for the patient <strong>${patient.name}</strong>`}. Untick any you do not want to grant.</p>
<form method="post" action="${action}">
${hidden(request, csrf)}
<fieldset>
<legend>Permissions</legend>
${scopes.length === 0 ? html`<p>No permissions are asked for.</p>` : choices}
</fieldset>
<div class="actions">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</div>
</form>`)
}

export interface ErrorPage {
  readonly title: string
  readonly message: string
}

/** An error that cannot go back to the client (RFC 6749, 4.1.2.1): told to the user, never redirected. */
export const errorPage = ({ title, message }: ErrorPage): string =>
  page(`Error: ${title}`, html`<h1>${title}</h1>
<p>${message}</p>
<p>The app that sent you here cannot be told about this error. Close this page and go back to the app.</p>`)
