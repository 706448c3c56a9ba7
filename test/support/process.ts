/**
 * Runs the real `svc` command in a child process, as a user would: arguments, environment and
 * working directory in; exit code, standard output and standard error out.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))
const main = join(root, "src", "main.ts")
const tsx = join(root, "node_modules", "tsx", "dist", "loader.mjs")

/**
 * The bundle of this code (scripts/build.mjs) that globalSetup builds once per run: it starts in under a
 * second where the TypeScript through tsx takes three to four, and it is what `npm start` runs. Beside
 * dist/svc.mjs, so it finds the migrations the same way.
 */
export const testBundle = join(root, "dist", "svc-test.mjs")

/** Tiny stand-ins for the R4 release packages, so a started server installs in milliseconds and offline. */
export const fixtureMirror = join(root, "test", "fixtures", "packages", "mirror")
const packageCache = mkdtempSync(join(tmpdir(), "svc-test-cache-"))

export interface RunOptions {
  readonly cwd?: string
  readonly env?: Record<string, string | undefined>
  /** Run this bundle (scripts/build.mjs); the default is the run's `testBundle`. */
  readonly bundle?: string
  /** Run the TypeScript entry point through tsx instead of a bundle. */
  readonly typescript?: boolean
}

/**
 * The environment of a test run without any SVC_ variable of the developer's shell, with the
 * package source pointed at the fixture mirror (a test may name another).
 */
const cleanEnv = (extra: Record<string, string | undefined> = {}): Record<string, string> => {
  const env: Record<string, string> = {
    SVC_CONFORMANCE_PACKAGE_REGISTRY: fixtureMirror,
    SVC_CONFORMANCE_PACKAGE_CACHE: packageCache
  }
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("SVC_") && value !== undefined) env[key] = value
  }
  for (const [key, value] of Object.entries(extra)) {
    if (value !== undefined) env[key] = value
  }
  return env
}

const entryOf = (options: RunOptions): ReadonlyArray<string> => {
  if (options.typescript === true) return ["--import", tsx, main]
  if (options.bundle !== undefined) return [options.bundle]
  if (!existsSync(testBundle)) throw new Error(`${testBundle} is missing: globalSetup builds it`)
  return [testBundle]
}

const launch = (args: ReadonlyArray<string>, options: RunOptions): ChildProcess =>
  spawn(process.execPath, [...entryOf(options), ...args], {
    cwd: options.cwd ?? root,
    env: cleanEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"]
  })

export interface Finished {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `svc args` to its end. */
export const runSvc = (args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Finished> =>
  new Promise((resolve, reject) => {
    const child = launch(args, options)
    let stdout = ""
    let stderr = ""
    child.stdout!.on("data", (chunk) => (stdout += chunk))
    child.stderr!.on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  })

export interface Running {
  readonly url: string
  readonly child: ChildProcess
  /** Every line written so far to standard output. */
  readonly lines: () => ReadonlyArray<string>
  readonly stderr: () => string
  /** Resolves with the first log line whose message is `message` (already written or still to come). */
  readonly logged: (message: string) => Promise<Record<string, unknown>>
  /** Resolves with the first log line `where` accepts (already written or still to come). */
  readonly loggedWhere: (where: (entry: Record<string, unknown>) => boolean) => Promise<Record<string, unknown>>
  /** Sends SIGTERM and waits for the exit. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<Finished>
}

/** Starts `svc args --bind 127.0.0.1:0` and resolves when its `listening` log line names the port. */
export const startSvc = (args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Running> =>
  new Promise((resolve, reject) => {
    const child = launch([...args, "--bind", "127.0.0.1:0"], options)
    let stdout = ""
    let stderr = ""
    let resolved = false
    const exited = new Promise<Finished>((done) =>
      child.on("close", (code, signal) => done({ code, signal, stdout, stderr }))
    )
    const waiters: Array<() => void> = []
    const entries = (): Array<Record<string, unknown>> =>
      stdout.split("\n").filter((line) => line.startsWith("{") && line.endsWith("}")).map((line) => JSON.parse(line))
    const loggedWhere = (where: (entry: Record<string, unknown>) => boolean, what = "the line looked for") =>
      new Promise<Record<string, unknown>>((found, missing) => {
        const check = () => {
          const entry = entries().find(where)
          if (entry) found(entry)
          else if (child.exitCode !== null || child.signalCode !== null) missing(new Error(`svc exited without logging ${what}: ${stderr}`))
          else waiters.push(check)
        }
        check()
      })
    const logged = (message: string) => loggedWhere((e) => e["message"] === message, message)
    child.on("close", () => waiters.splice(0).forEach((w) => w()))
    child.stderr!.on("data", (chunk) => (stderr += chunk))
    child.stdout!.on("data", (chunk) => {
      stdout += chunk
      waiters.splice(0).forEach((w) => w())
      if (resolved) return
      for (const line of stdout.split("\n")) {
        if (!line.startsWith("{")) continue
        const entry = JSON.parse(line) as { message?: string; port?: number }
        if (entry.message === "listening" && typeof entry.port === "number") {
          resolved = true
          resolve({
            url: `http://127.0.0.1:${entry.port}`,
            child,
            lines: () => stdout.split("\n").filter((l) => l.length > 0),
            stderr: () => stderr,
            logged,
            loggedWhere,
            stop: (signal = "SIGTERM") => {
              child.kill(signal)
              return exited
            }
          })
        }
      }
    })
    void exited.then((finished) => {
      if (!resolved) reject(new Error(`svc exited (${finished.code}) before listening: ${finished.stderr}${finished.stdout}`))
    })
  })

/** A temporary directory, removed by the returned function. */
export const tempDir = (): { readonly path: string; readonly remove: () => void } => {
  const path = mkdtempSync(join(tmpdir(), "svc-test-"))
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) }
}
