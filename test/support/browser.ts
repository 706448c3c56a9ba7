/**
 * Headless Chromium for the tests of what a person sees and does in a browser (the authorization pages,
 * src/auth/pages.ts), driven by puppeteer-core. Chromium is Debian's package (`.ci/run` installs it), found
 * as `chromium` on the PATH or at SVC_TEST_CHROMIUM. Without it the browser tests are skipped with a
 * visible notice, except under CI=true, where a missing browser is a failure (as for Postgres).
 *
 * One browser per test file: `layer(browserLayer)` shares it between a file's tests. It runs with a profile
 * of its own in a new temporary directory, removed when the browser closes, and with the background
 * services that would reach the network off; pages open only what a test serves on 127.0.0.1.
 *
 * The helpers find controls as a person does: by their accessible name (the label a screen reader reads)
 * and role, through the accessibility tree, so they work the same with JavaScript disabled.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import { accessSync, constants } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import puppeteer, { type Browser, type ElementHandle, type Page, type SerializedAXNode } from "puppeteer-core"

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Chromium's executable: SVC_TEST_CHROMIUM, or the first `chromium` on the PATH. */
const findChromium = (): string | undefined => {
  const configured = process.env["SVC_TEST_CHROMIUM"]
  if (configured !== undefined && configured !== "") return configured
  return (process.env["PATH"] ?? "").split(Path.delimiter).filter((dir) => dir !== "")
    .map((dir) => Path.join(dir, "chromium")).find(executable)
}

export const chromiumPath: string | undefined = findChromium()

if (chromiumPath === undefined) {
  if (process.env["CI"] === "true") throw new Error("Chromium is required under CI but `chromium` is not on the PATH (set SVC_TEST_CHROMIUM)")
  console.warn("NOTICE: browser tests skipped: `chromium` is not on the PATH (set SVC_TEST_CHROMIUM)")
}

/** Whether the browser tests can run here. */
export const browserAvailable = chromiumPath !== undefined

/** Flags: headless, no sandbox (containers), no GPU, and nothing that calls home. */
export const chromiumFlags: ReadonlyArray<string> = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** A browser with a new temporary profile; closed, and its profile removed, when the scope closes. */
export const launchBrowser: Effect.Effect<Browser, never, Scope.Scope> = Effect.gen(function*() {
  if (chromiumPath === undefined) return yield* Effect.dieMessage("Chromium is not available")
  const profile = yield* Effect.acquireRelease(
    Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "svc-chromium-"))),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )
  return yield* Effect.acquireRelease(
    Effect.promise(() =>
      puppeteer.launch({ executablePath: chromiumPath, headless: false, userDataDir: profile, args: [...chromiumFlags] })
    ),
    (browser) => Effect.promise(() => browser.close())
  )
})

/** The shared browser of a test file. */
export class TestBrowser extends Context.Tag("test/TestBrowser")<TestBrowser, Browser>() {}

export const browserLayer: Layer.Layer<TestBrowser> = Layer.scoped(TestBrowser, launchBrowser)

/** A new tab showing `url`, with JavaScript on or off; closed when the scope closes. */
export const openPage = (
  url: string,
  options: { readonly javaScript?: boolean } = {}
): Effect.Effect<Page, never, Scope.Scope | TestBrowser> =>
  Effect.gen(function*() {
    const browser = yield* TestBrowser
    const page = yield* Effect.acquireRelease(
      Effect.promise(() => browser.newPage()),
      (page) => Effect.promise(() => page.close())
    )
    yield* Effect.promise(() => page.setJavaScriptEnabled(options.javaScript ?? true))
    yield* Effect.promise(() => page.goto(url))
    return page
  })

const ariaSelector = (name: string, role: string | undefined): string => {
  const escaped = name.replace(/[\\"]/g, (c) => `\\${c}`)
  return role === undefined ? `aria/${escaped}` : `aria/${escaped}[role="${role}"]`
}

/** The first control named `name` with one of `roles` (any role when empty), or undefined. */
const find = async (page: Page, name: string, roles: ReadonlyArray<string | undefined>) => {
  for (const role of roles) {
    const found = await page.$(ariaSelector(name, role))
    if (found !== null) return found
  }
  return undefined
}

/** The control whose accessible name is `name` (and whose role is `role`, when given); dies if none. */
export const byLabel = (page: Page, name: string, role?: string): Effect.Effect<ElementHandle> =>
  Effect.promise(async () => {
    const found = await find(page, name, [role])
    if (found === undefined) throw new Error(`No ${role ?? "control"} named "${name}" on ${page.url()}`)
    return found
  })

/** Types `text` into the text field labelled `label`. */
export const fillByLabel = (page: Page, label: string, text: string): Effect.Effect<void> =>
  Effect.flatMap(byLabel(page, label), (field) => Effect.promise(() => field.type(text)))

/** Clicks the button (or else the link) whose text is `text`. */
export const clickByText = (page: Page, text: string): Effect.Effect<void> =>
  Effect.promise(async () => {
    const found = await find(page, text, ["button", "link"])
    if (found === undefined) throw new Error(`No button or link "${text}" on ${page.url()}`)
    await found.click()
  })

/** Runs `action` (a click, a key press) and waits until the page it leads to has loaded. */
export const waitForNavigation = <A, E, R>(page: Page, action: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const navigated = page.waitForNavigation()
    const result = yield* action
    yield* Effect.promise(() => navigated)
    return result
  })

/** Presses one key (`Tab`, `Space`, `Enter`, `ArrowDown`) on the focused element. */
export const press = (page: Page, key: Parameters<Page["keyboard"]["press"]>[0]): Effect.Effect<void> =>
  Effect.promise(() => page.keyboard.press(key))

/** The page's accessibility tree, every node included. */
export const accessibilityTree = (page: Page): Effect.Effect<SerializedAXNode> =>
  Effect.promise(async () => {
    const tree = await page.accessibility.snapshot({ interestingOnly: false })
    if (tree === null) throw new Error(`No accessibility tree for ${page.url()}`)
    return tree
  })

/** Every node of an accessibility tree, depth first. */
export const axNodes = (node: SerializedAXNode): ReadonlyArray<SerializedAXNode> =>
  [node, ...(node.children ?? []).flatMap(axNodes)]

/** The focused node of the page, as assistive technology sees it. */
export const focused = (page: Page): Effect.Effect<SerializedAXNode | undefined> =>
  Effect.map(accessibilityTree(page), (tree) => axNodes(tree).find((node) => node.focused === true && node.role !== "RootWebArea"))

/** Presses Tab until the control named `name` has the focus; fails after `limit` presses. */
export const tabTo = (page: Page, name: string, limit = 30): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let presses = 0; presses < limit; presses++) {
      yield* press(page, "Tab")
      const node = yield* focused(page)
      if (node?.name === name) return
    }
    return yield* Effect.dieMessage(`Tab never reached "${name}" on ${page.url()}`)
  })
