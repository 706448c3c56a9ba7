/**
 * The example `/sync` client (scripts/sync-example.mjs) run as a user runs it, against the real server: it prints
 * the result, then each commit that changes it; a query that cannot be read ends it with status 1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { call, startServer } from "../support/server.ts"

const script = fileURLToPath(new URL("../../scripts/sync-example.mjs", import.meta.url))

/** The script running with `args`: its stdout and stderr lines, and its exit code once it ends. */
const run = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const lines = yield* Queue.unbounded<string>()
    const exit = yield* Queue.unbounded<number | null>()
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] })),
      (child) => Effect.sync(() => void child.kill("SIGKILL"))
    )
    let pending = ""
    const onData = (chunk: Buffer) => {
      pending += chunk.toString("utf8")
      const parts = pending.split("\n")
      pending = parts.pop() ?? ""
      for (const line of parts) lines.unsafeOffer(line)
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", (code) => exit.unsafeOffer(code))
    return { lines, exit }
  })

describe("the example /sync client", () => {
  it.scoped("prints the result and each change, and ends with 1 on a query that cannot be read", () =>
    Effect.gen(function*() {
      const server = yield* startServer("sqlite", { conformance: { update_as_create: true } })
      yield* call("PUT", `${server.base}/Patient/ex1`, { body: { resourceType: "Patient", id: "ex1", name: [{ family: "Example" }] } })
      const { lines } = yield* run([server.url, "Patient?family=Example"])
      expect(yield* Queue.take(lines)).toMatch(/^result at \d+: Patient\/ex1$/)
      yield* call("PUT", `${server.base}/Patient/ex2`, { body: { resourceType: "Patient", id: "ex2", name: [{ family: "Example" }] } })
      expect(yield* Queue.take(lines)).toMatch(/^commit \d+: entered \[Patient\/ex2\] changed \[\] left \[\]; 2 in the result$/)
      yield* call("PUT", `${server.base}/Patient/ex1`, { body: { resourceType: "Patient", id: "ex1", name: [{ family: "Renamed" }] } })
      expect(yield* Queue.take(lines)).toMatch(/^commit \d+: entered \[\] changed \[\] left \[Patient\/ex1\]; 1 in the result$/)

      const failing = yield* run([server.url, "Patient?no-such-parameter=1"])
      expect(yield* Queue.take(failing.lines)).toMatch(/^the query failed \(InvalidQuery\): .*no-such-parameter/)
      expect(yield* Queue.take(failing.exit)).toBe(1)
    }), 60_000)
})
