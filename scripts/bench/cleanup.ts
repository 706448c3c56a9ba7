/**
 * Everything the bench must undo (children, databases, temporary files), undone in reverse order
 * at the end of a run, on an error, and on SIGINT/SIGTERM. Children still alive when the process
 * exits anyway are killed outright.
 */
import type { ChildProcess } from "node:child_process"

type Task = () => Promise<void> | void

const tasks: Array<{ readonly label: string; readonly run: Task }> = []
const children = new Set<ChildProcess>()

/** Registers an undo step; the returned function runs it now (once) instead of at the end. */
export const onCleanup = (label: string, run: Task): (() => Promise<void>) => {
  const entry = { label, run }
  tasks.push(entry)
  return async () => {
    const index = tasks.indexOf(entry)
    if (index < 0) return
    tasks.splice(index, 1)
    await run()
  }
}

export const trackChild = (child: ChildProcess): void => {
  children.add(child)
  child.once("exit", () => children.delete(child))
}

export const cleanupAll = async (): Promise<void> => {
  for (let entry = tasks.pop(); entry !== undefined; entry = tasks.pop()) {
    try {
      await entry.run()
    } catch (error) {
      console.error(`cleanup: ${entry.label} failed: ${String(error)}`)
    }
  }
}

/** The shared abort signal of the run: set on SIGINT/SIGTERM, it stops the load in progress. */
export const interrupted = new AbortController()

export const installSignalHandlers = (): void => {
  const killChildren = () => {
    for (const child of children) child.kill("SIGKILL")
  }
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (interrupted.signal.aborted) {
        console.error(`\n${signal} again: killing the servers without cleaning up`)
        killChildren()
        process.exit(130)
      }
      console.error(`\n${signal}: stopping the load and cleaning up (again to force)`)
      interrupted.abort(new Error(`interrupted by ${signal}`))
    })
  }
  process.once("exit", killChildren)
}
