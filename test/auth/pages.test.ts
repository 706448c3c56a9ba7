/**
 * The authorization pages (src/auth/pages.ts). Escaping, the scope descriptions and the headers as units;
 * then each page in headless Chromium (test/support/browser.ts), served by a small node:http server on
 * 127.0.0.1 that records every form posted to it: signing in, picking a patient, granting fewer scopes,
 * denying, by mouse and by keyboard alone, with JavaScript on and off, and what assistive technology is
 * given (names, headings, language, errors tied to their fields).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { Page } from "puppeteer-core"
import { escapeHtml, html } from "../../src/auth/html.ts"
import { consentPage, errorPage, loginPage, pageHeaders, pickerPage, scopeDescription } from "../../src/auth/pages.ts"
import {
  accessibilityTree,
  axNodes,
  browserAvailable,
  browserLayer,
  byLabel,
  clickByText,
  fillByLabel,
  focused,
  openPage,
  press,
  tabTo,
  waitForNavigation
} from "../support/browser.ts"

const hostile = `<script>alert(1)</script>"'&`

const login = (extra: Partial<Parameters<typeof loginPage>[0]> = {}) =>
  loginPage({ action: "/login", request: "req-1", csrf: "csrf-1", clientName: hostile, demo: true, ...extra })

const patients = [
  { id: "p-ann", name: "Ann Smith", birthDate: "1970-03-14", gender: "female" },
  { id: "p-bob", name: "Bob Smith", birthDate: "1985-11-02", gender: "male" },
  { id: "p-cy", name: "Cy Jones" }
]

const picker = (query: string) =>
  pickerPage({
    action: "/pick",
    request: "req-2",
    csrf: "csrf-2",
    query,
    patients: patients.filter((p) => p.name.toLowerCase().includes(query.toLowerCase()))
  })

const consentScopes = ["openid", "fhirUser", "launch/patient", "patient/Observation.rs", "patient/Patient.r", "offline_access"]

const consent = () =>
  consentPage({
    action: "/consent",
    request: "req-3",
    csrf: "csrf-3",
    clientName: "Growth Chart",
    clientUri: "https://growth.example/",
    patient: { name: "Bob Smith" },
    scopes: consentScopes.map((scope) => ({ scope, description: scopeDescription(scope), required: scope === "openid" }))
  })

describe("escapeHtml", () => {
  it("turns the five characters that can end text or an attribute into references, and nothing else", () => {
    expect(escapeHtml(hostile)).toBe("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;")
    expect(escapeHtml("Zoë Ærøskøbing, 3 > 2")).toBe("Zoë Ærøskøbing, 3 &gt; 2")
    expect(escapeHtml("&amp;")).toBe("&amp;amp;")
  })

  it("is applied by the html tag to every value, but not to markup the tag made", () => {
    const name = html`<b>${hostile}</b>`
    expect(html`<p title="${hostile}">${name}${[hostile, 1]}${undefined}${false}</p>`.toString()).toBe(
      `<p title="&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"><b>&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;</b>&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;1</p>`
    )
  })

  it("lets no value of any page become markup: text and attributes from outside show as given", () => {
    const pages = [
      loginPage({ action: hostile, request: hostile, csrf: hostile, clientName: hostile, error: hostile, demo: true, oidc: { action: hostile, label: hostile } }),
      pickerPage({ action: hostile, request: hostile, csrf: hostile, query: hostile, patients: [{ id: hostile, name: hostile, birthDate: hostile, gender: hostile }], error: hostile }),
      pickerPage({ action: "/pick", request: "r", csrf: "c", query: hostile, patients: [] }),
      consentPage({ action: hostile, request: hostile, csrf: hostile, clientName: hostile, clientUri: `https://app.example/${hostile}`, patient: { name: hostile }, scopes: [{ scope: hostile, description: hostile, required: true }] }),
      errorPage({ title: hostile, message: hostile })
    ]
    for (const page of pages) {
      expect(page).not.toContain("<script")
      expect(page).not.toContain(`"'`)
      expect(page).toContain("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;")
    }
  })

  it("links the client's home page only when it is an http or https URL", () => {
    const consent = (clientUri: string) => consentPage({ action: "/c", request: "r", csrf: "c", clientName: "App", clientUri, scopes: [] })
    expect(consent("https://app.example/about")).toContain(`<a href="https://app.example/about" rel="noopener noreferrer">`)
    expect(consent("javascript:alert(1)")).not.toContain("javascript:")
    expect(consent("javascript:alert(1)")).not.toContain("<a ")
  })
})

describe("loginPage", () => {
  it("offers the username form only for the demo sign-in, always with its notice", () => {
    const oidc = { action: "/oidc", label: "Sign in with Acme Health" }
    const demo = login({ oidc })
    expect(demo).toContain(`name="username"`)
    expect(demo).toContain("Demonstration sign-in.")
    expect(demo).toContain("Sign in with Acme Health")
    const organisation = login({ demo: false, oidc })
    expect(organisation).not.toContain(`name="username"`)
    expect(organisation).not.toContain("Demonstration")
    expect(organisation).toContain(`<form method="post" action="/oidc">`)
    expect(login({ demo: false })).toContain("No way to sign in is configured on this server.")
  })
})

describe("scopeDescription", () => {
  it.each([
    ["patient/Observation.rs", "Read and search your Observation records"],
    ["patient/Observation.read", "Read and search your Observation records"],
    ["patient/*.read", "Read and search all your records of every type"],
    ["user/Patient.cruds", "Create, read, update, delete and search the Patient records you have access to"],
    ["user/*.write", "Create, update and delete all resources of every type you have access to"],
    ["system/*.*", "Create, read, update, delete and search all resources of every type this system holds"],
    ["system/Encounter.r", "Read all Encounter records this system holds"],
    ["patient/Observation.rs?category=laboratory", "Read and search your Observation records, only those matching category=laboratory"],
    [
      "patient/Observation.s?category=laboratory&status=final",
      "Search your Observation records, only those matching category=laboratory and status=final"
    ],
    ["launch", "Know the patient and encounter open in the EHR session it is launched from"],
    ["launch/patient", "Ask you to choose a patient, and know which patient you chose"],
    ["launch/encounter", "Ask you to choose an encounter, and know which encounter you chose"],
    ["openid", "Confirm that you signed in (OpenID Connect)"],
    ["fhirUser", "Know who you are (your FHIR user record)"],
    ["profile", "Know who you are (your FHIR user record, as earlier SMART versions ask for it)"],
    ["online_access", "Stay signed in while you are online"],
    ["offline_access", "Keep access when you are offline"],
    ["patient/Observation.sr", "Unknown permission (patient/Observation.sr); it will not be granted"],
    ["admin", "Unknown permission (admin); it will not be granted"]
  ])("describes %s", (scope, description) => {
    expect(scopeDescription(scope)).toBe(description)
  })
})

describe("pageHeaders", () => {
  it("forbids framing, caching, referrers, scripts and every resource but the pages' own style", () => {
    const headers = pageHeaders()
    expect(headers).toMatchObject({
      "Content-Type": "text/html; charset=utf-8",
      "Cache-Control": "no-store",
      "X-Frame-Options": "DENY",
      "Referrer-Policy": "no-referrer"
    })
    expect(headers["Content-Security-Policy"]).toMatch(
      /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]{43}='; form-action 'self'; frame-ancestors 'none'; base-uri 'none'$/
    )
  })

  it("lets forms lead to the origins of the given redirect targets, and to nothing that is not one", () => {
    const csp = pageHeaders([
      "https://app.example/callback?x=1",
      "https://App.Example:443/other",
      "http://127.0.0.1:9000/cb",
      "com.example.app:/callback",
      "javascript:alert(1)",
      "https://evil.example;script-src *",
      "not a url"
    ])["Content-Security-Policy"]
    expect(csp).toContain("; form-action 'self' https://app.example http://127.0.0.1:9000 com.example.app:; ")
    expect(csp).not.toContain("javascript")
    expect(csp).not.toContain("evil")
  })
})

/** A form as a server receives it. */
interface Posted {
  readonly path: string
  readonly form: URLSearchParams
}

interface Reply {
  readonly status?: number
  readonly headers?: Record<string, string>
  readonly body?: string
}

/** What the little server answers: a page for a GET, and what follows a POST. */
type Route = (request: { readonly method: string; readonly path: string; readonly form: URLSearchParams }) => Reply

/** The page a POST leads to, when the route has nothing else to say. */
const receivedPage = `<!DOCTYPE html><html lang="en"><head><title>Received</title></head><body><main><h1>Received</h1></main></body></html>`

const page200 = (body: string, formTargets: ReadonlyArray<string> = []): Reply => ({ headers: pageHeaders(formTargets), body })

interface FormServer {
  readonly url: string
  /** The forms posted, in order. */
  readonly posted: ReadonlyArray<Posted>
  /** Every request, as "METHOD path". */
  readonly requests: ReadonlyArray<string>
}

/** A server on 127.0.0.1 answering by `route` and recording every request and every POSTed form, in order. */
const formServer = (route: Route): Effect.Effect<FormServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const posted: Array<Posted> = []
    const requests: Array<string> = []
    const handle = (request: IncomingMessage, response: ServerResponse) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const url = new URL(request.url ?? "/", "http://127.0.0.1")
        const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"))
        if (request.method === "POST") posted.push({ path: url.pathname, form })
        requests.push(`${request.method} ${url.pathname}`)
        const reply = route({ method: request.method ?? "GET", path: url.pathname, form })
        response.writeHead(reply.status ?? 200, reply.headers ?? pageHeaders())
        response.end(reply.body ?? "")
      })
    }
    const server = createServer(handle)
    const port = yield* Effect.acquireRelease(
      Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    return { url: `http://127.0.0.1:${port}`, posted, requests }
  })

/** Answers GET with `body` and a POST with the "Received" page. */
const showing = (body: string, formTargets: ReadonlyArray<string> = []): Route => ({ method }) =>
  method === "GET" ? page200(body, formTargets) : page200(receivedPage)

const text = (page: Page, selector: string) => Effect.promise(() => page.$eval(selector, (element) => element.textContent ?? ""))
const count = (page: Page, selector: string) => Effect.promise(() => page.$$eval(selector, (elements) => elements.length))
const fields = (posted: Posted) => [...posted.form.entries()]

/** What every page owes assistive technology: a language, one h1, a name for every control. */
const accessible = (page: Page) =>
  Effect.gen(function*() {
    expect(yield* Effect.promise(() => page.$eval("html", (element) => element.getAttribute("lang")))).toBe("en")
    expect(yield* count(page, "h1")).toBe(1)
    expect(yield* count(page, "main")).toBe(1)
    expect(yield* count(page, "script, link, img, iframe")).toBe(0)
    const nodes = axNodes(yield* accessibilityTree(page))
    expect(nodes.filter((node) => node.role === "heading" && node.level === 1)).toHaveLength(1)
    const controls = nodes.filter((node) => ["textbox", "searchbox", "checkbox", "radio", "button", "link"].includes(node.role))
    expect(controls.filter((node) => (node.name ?? "").trim() === "")).toEqual([])
    expect(controls.length).toBe(yield* count(page, "input:not([type=hidden]), button, select, textarea, a[href]"))
    return nodes
  })

describe.skipIf(!browserAvailable)("authorization pages in Chromium", () => {
  layer(browserLayer, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.scoped("the harness really turns JavaScript off", () =>
      Effect.gen(function*() {
        const server = yield* formServer(() => ({ headers: { "Content-Type": "text/html" }, body: `<!DOCTYPE html><title>before</title><script>document.title = "after"</script>` }))
        const on = yield* openPage(`${server.url}/`, { javaScript: true })
        const off = yield* openPage(`${server.url}/`, { javaScript: false })
        expect(yield* Effect.promise(() => on.title())).toBe("after")
        expect(yield* Effect.promise(() => off.title())).toBe("before")
      }))

    for (const javaScript of [true, false]) {
      const mode = javaScript ? "JavaScript on" : "JavaScript off"

      it.scoped(`${mode}: signing in posts the username with the request and CSRF fields; the client's name shows as text`, () =>
        Effect.gen(function*() {
          const server = yield* formServer(showing(login()))
          const page = yield* openPage(`${server.url}/login`, { javaScript })
          const dialogs: Array<string> = []
          page.on("dialog", (dialog) => void dialogs.push(dialog.message()))
          expect(yield* text(page, "main > p")).toBe(`${hostile} asks for access to this FHIR server. Sign in to continue.`)
          expect(yield* text(page, ".notice")).toContain("Demonstration sign-in. This server verifies nothing")
          yield* fillByLabel(page, "Username", "alice")
          yield* waitForNavigation(page, clickByText(page, "Sign in"))
          expect(yield* Effect.promise(() => page.title())).toBe("Received")
          expect(server.posted.map(fields)).toEqual([[["request", "req-1"], ["csrf", "csrf-1"], ["username", "alice"]]])
          expect(server.posted[0]!.path).toBe("/login")
          expect(dialogs).toEqual([])
        }))

      it.scoped(`${mode}: signing in with the organisation's provider posts the request and CSRF fields to its action`, () =>
        Effect.gen(function*() {
          const server = yield* formServer(showing(login({ oidc: { action: "/oidc", label: "Sign in with Acme Health" } })))
          const page = yield* openPage(`${server.url}/login`, { javaScript })
          yield* waitForNavigation(page, clickByText(page, "Sign in with Acme Health"))
          expect(server.posted.map((p) => [p.path, fields(p)])).toEqual([["/oidc", [["request", "req-1"], ["csrf", "csrf-1"]]]])
        }))

      it.scoped(`${mode}: the picker searches by name, then continues with the second patient found`, () =>
        Effect.gen(function*() {
          const server = yield* formServer(({ method, form }) => page200(method === "GET" || form.has("q") ? picker(form.get("q") ?? "") : receivedPage))
          const page = yield* openPage(`${server.url}/pick`, { javaScript })
          yield* fillByLabel(page, "Search patients by name", "smith")
          yield* waitForNavigation(page, press(page, "Enter"))
          expect(yield* Effect.promise(() => page.$$eval("fieldset label", (labels) => labels.map((l) => l.textContent)))).toEqual(["Ann Smith", "Bob Smith"])
          const bob = yield* byLabel(page, "Bob Smith", "radio")
          yield* Effect.promise(() => bob.click())
          yield* waitForNavigation(page, clickByText(page, "Continue"))
          expect(server.posted.map(fields)).toEqual([
            [["request", "req-2"], ["csrf", "csrf-2"], ["q", "smith"]],
            [["request", "req-2"], ["csrf", "csrf-2"], ["patient", "p-bob"]]
          ])
        }))

      it.scoped(`${mode}: unticking a scope leaves it out of the grant; Allow posts decision=allow`, () =>
        Effect.gen(function*() {
          const server = yield* formServer(showing(consent()))
          const page = yield* openPage(`${server.url}/consent`, { javaScript })
          const observations = yield* byLabel(page, "Read and search your Observation records", "checkbox")
          yield* Effect.promise(() => observations.click())
          yield* waitForNavigation(page, clickByText(page, "Allow"))
          const [form] = server.posted.map((p) => p.form)
          expect(form!.getAll("scope")).toEqual(consentScopes.filter((s) => s !== "patient/Observation.rs"))
          expect(form!.get("decision")).toBe("allow")
          expect([form!.get("request"), form!.get("csrf")]).toEqual(["req-3", "csrf-3"])
        }))

      it.scoped(`${mode}: Deny posts decision=deny`, () =>
        Effect.gen(function*() {
          const server = yield* formServer(showing(consent()))
          const page = yield* openPage(`${server.url}/consent`, { javaScript })
          yield* waitForNavigation(page, clickByText(page, "Deny"))
          expect(server.posted.map((p) => [p.form.get("decision"), p.form.get("request"), p.form.get("csrf")])).toEqual([["deny", "req-3", "csrf-3"]])
        }))

      it.scoped(`${mode}: works by keyboard alone: Tab to a control, Space to untick, arrows to choose, Enter to submit`, () =>
        Effect.gen(function*() {
          const loginServer = yield* formServer(showing(login()))
          const loginTab = yield* openPage(`${loginServer.url}/login`, { javaScript })
          yield* tabTo(loginTab, "Username")
          yield* Effect.promise(() => loginTab.keyboard.type("bob"))
          yield* waitForNavigation(loginTab, press(loginTab, "Enter"))
          expect(loginServer.posted.map((p) => p.form.get("username"))).toEqual(["bob"])

          const pickServer = yield* formServer(showing(picker("")))
          const pickTab = yield* openPage(`${pickServer.url}/pick`, { javaScript })
          yield* tabTo(pickTab, "Ann Smith")
          yield* press(pickTab, "ArrowDown")
          expect(yield* focused(pickTab)).toMatchObject({ role: "radio", name: "Bob Smith", checked: true })
          yield* waitForNavigation(pickTab, press(pickTab, "Enter"))
          expect(pickServer.posted.map((p) => p.form.get("patient"))).toEqual(["p-bob"])

          const consentServer = yield* formServer(showing(consent()))
          const consentTab = yield* openPage(`${consentServer.url}/consent`, { javaScript })
          yield* tabTo(consentTab, "Keep access when you are offline")
          yield* press(consentTab, "Space")
          expect(yield* focused(consentTab)).toMatchObject({ role: "checkbox", checked: false })
          yield* waitForNavigation(consentTab, press(consentTab, "Enter"))
          const [form] = consentServer.posted.map((p) => p.form)
          expect(form!.getAll("scope")).toEqual(consentScopes.filter((s) => s !== "offline_access"))
          expect(form!.get("decision")).toBe("allow")
        }))
    }

    it.scoped("every page names its language, has one h1 and a name for every control", () =>
      Effect.gen(function*() {
        const pages = {
          "/login": login({ oidc: { action: "/oidc", label: "Sign in with Acme Health" } }),
          "/pick": picker(""),
          "/none": picker("nobody"),
          "/consent": consent(),
          "/error": errorPage({ title: "Unknown app", message: "No app is registered with the client_id this link gave." })
        }
        const server = yield* formServer(({ path }) => page200(pages[path as keyof typeof pages] ?? receivedPage))
        const groups: Record<string, ReadonlyArray<string>> = {}
        for (const path of Object.keys(pages)) {
          const page = yield* openPage(`${server.url}${path}`, { javaScript: false })
          const nodes = yield* accessible(page)
          groups[path] = nodes.filter((node) => node.role === "group" && node.name !== "").map((node) => node.name ?? "")
        }
        expect(groups["/pick"]).toContain("Choose a patient")
        expect(groups["/consent"]).toContain("Permissions")
        const none = yield* openPage(`${server.url}/none`, { javaScript: false })
        expect(yield* text(none, "[role=status]")).toBe("No patients match “nobody”.")
        expect(yield* count(none, "[type=radio]")).toBe(0)
      }))

    it.scoped("an error is announced and tied to its field, and the title says there is one", () =>
      Effect.gen(function*() {
        const server = yield* formServer(({ path }) =>
          page200(path === "/login"
            ? login({ error: "Enter a username to sign in." })
            : pickerPage({ action: "/pick", request: "r", csrf: "c", query: "", patients, error: "Choose a patient to continue." })))
        const loginTab = yield* openPage(`${server.url}/login`, { javaScript: false })
        expect(yield* Effect.promise(() => loginTab.title())).toBe("Error: Sign in")
        const nodes = axNodes(yield* accessibilityTree(loginTab))
        expect(nodes.find((node) => node.role === "textbox")).toMatchObject({ name: "Username", description: "Enter a username to sign in.", invalid: "true" })
        expect(yield* text(loginTab, "[role=alert]")).toBe("Enter a username to sign in.")

        const pickTab = yield* openPage(`${server.url}/pick`, { javaScript: false })
        const radio = axNodes(yield* accessibilityTree(pickTab)).find((node) => node.role === "radio" && node.name === "Bob Smith")
        expect(radio?.description).toBe("Born 1985-11-02, gender male. Choose a patient to continue.")
      }))

    it.scoped("the focused control is outlined: the style sheet is allowed by the page's CSP hash", () =>
      Effect.gen(function*() {
        const server = yield* formServer(showing(consent()))
        const page = yield* openPage(`${server.url}/consent`)
        const styleBlocked: Array<string> = []
        page.on("console", (message) => void (message.text().includes("style-src") && styleBlocked.push(message.text())))
        yield* tabTo(page, "Read and search your Observation records")
        const outline = yield* Effect.promise(() =>
          // Run in the page (the test code has no DOM types): the computed outline of the focused element.
          page.evaluate("(({ outlineStyle, outlineWidth }) => [outlineStyle, outlineWidth])(getComputedStyle(document.activeElement))")
        )
        expect(outline).toEqual(["solid", "3px"])
        expect(styleBlocked).toEqual([])
      }))

    it.scoped("a redirect after a form goes through only to an origin the page's headers allow", () =>
      Effect.gen(function*() {
        const client = yield* formServer(() => page200(receivedPage))
        const callback = `${client.url}/callback`
        const to = (allowed: ReadonlyArray<string>): Route => ({ method }) =>
          method === "GET" ? page200(consent(), allowed) : { status: 303, headers: { location: `${callback}?code=abc` } }

        const allowedServer = yield* formServer(to([callback]))
        const allowed = yield* openPage(`${allowedServer.url}/consent`)
        yield* waitForNavigation(allowed, clickByText(allowed, "Allow"))
        expect(allowed.url()).toBe(`${callback}?code=abc`)
        expect(client.requests).toEqual(["GET /callback"])

        const blockedServer = yield* formServer(to([]))
        const blocked = yield* openPage(`${blockedServer.url}/consent`, { javaScript: false })
        const refused = new Promise<string>((resolve) => blocked.on("console", (message) => resolve(message.text())))
        yield* clickByText(blocked, "Allow")
        expect(yield* Effect.promise(() => refused)).toContain(`Content Security Policy directive: "form-action 'self'"`)
        expect(blockedServer.posted).toHaveLength(1)
        expect(blocked.url()).toBe(`${blockedServer.url}/consent`)
        expect(client.requests).toEqual(["GET /callback"])
      }))
  })
})
