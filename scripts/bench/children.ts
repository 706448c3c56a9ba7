/**
 * Starts a server as a child process with its output in log files (so the bench process spends no
 * time reading it), waits for its `listening` log line and, when asked, for `/readyz`, and stops it
 * with SIGTERM (SIGKILL after 10 s, or `killAfterMs`).
 */
import { spawn } from "node:child_process"
import { closeSync, existsSync, openSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { interrupted, onCleanup, trackChild } from "./cleanup.ts"

export interface Child {
  readonly name: string
  readonly pid: number
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly stop: () => Promise<void>
}

export interface ChildOptions {
  readonly name: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Record<string, string>
  /** Where the log files go. */
  readonly logDir: string
  /** A path answering 200 once the server is ready; otherwise `listening` is enough. */
  readonly readyPath?: string
  readonly timeoutMs?: number
  /** How long `stop` waits after SIGTERM before SIGKILL (default 10 s). */
  readonly killAfterMs?: number
}

const sleep = (ms: number) => {
  interrupted.signal.throwIfAborted()
  return new Promise((resolve) => setTimeout(resolve, ms))
}

const listeningPort = (stdoutPath: string): number | undefined => {
  if (!existsSync(stdoutPath)) return undefined
  for (const line of readFileSync(stdoutPath, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue
    try {
      const entry = JSON.parse(line) as { message?: unknown; port?: unknown }
      if (entry.message === "listening" && typeof entry.port === "number") return entry.port
    } catch {
      // a line still being written
    }
  }
  return undefined
}

const tail = (path: string): string => (existsSync(path) ? readFileSync(path, "utf8").split("\n").slice(-15).join("\n") : "")

export const startChild = async (options: ChildOptions): Promise<Child> => {
  const stdoutPath = join(options.logDir, `${options.name}.stdout.log`)
  const stderrPath = join(options.logDir, `${options.name}.stderr.log`)
  const out = openSync(stdoutPath, "w")
  const err = openSync(stderrPath, "w")
  const child = spawn(process.execPath, [...options.args], { cwd: options.cwd, env: options.env, stdio: ["ignore", out, err] })
  closeSync(out)
  closeSync(err)
  trackChild(child)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const stop = onCleanup(`stopping ${options.name}`, async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    const killer = setTimeout(() => child.kill("SIGKILL"), options.killAfterMs ?? 10_000)
    await exited
    clearTimeout(killer)
  })
  const failed = (why: string) => new Error(`${options.name} ${why}\n${tail(stderrPath)}\n${tail(stdoutPath)}`)
  const deadline = Date.now() + (options.timeoutMs ?? 60_000)
  try {
    let port: number | undefined
    while ((port = listeningPort(stdoutPath)) === undefined) {
      if (child.exitCode !== null || child.signalCode !== null) throw failed(`exited (${child.exitCode ?? child.signalCode}) before listening`)
      if (Date.now() > deadline) throw failed("did not log `listening` in time")
      await sleep(50)
    }
    const url = `http://127.0.0.1:${port}`
    if (options.readyPath !== undefined) {
      while (!(await fetch(`${url}${options.readyPath}`).then((r) => r.arrayBuffer().then(() => r.ok), () => false))) {
        if (child.exitCode !== null || child.signalCode !== null) throw failed(`exited (${child.exitCode ?? child.signalCode}) before ready`)
        if (Date.now() > deadline) throw failed(`was not ready (${options.readyPath}) in time`)
        await sleep(100)
      }
    }
    if (child.pid === undefined) throw failed("has no process id")
    return { name: options.name, pid: child.pid, url, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
