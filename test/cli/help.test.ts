/** `svc --help` and `svc migrate --help` as a person reads them: in a pager, a file or a terminal. */
import { execFileSync, spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { useColor } from "../../src/cli/help.ts"
import { migrateFlags, serveFlags } from "../../src/cli/flags.ts"
import { runSvc, testBundle } from "../support/process.ts"

const escape = "\u001b["

/** The flags the help describes, in order: the lines that start with two spaces and a flag. */
const described = (help: string): ReadonlyArray<string> =>
  help.split("\n").filter((line) => /^ {2}--/.test(line)).map((line) => /^ {2}(--[a-z-]+)/.exec(line)![1]!)

/** `script` gives the command a terminal; without it the terminal case cannot be run here. */
const hasScript = spawnSync("script", ["--version"]).status === 0

const onTerminal = (env: Record<string, string>): string =>
  execFileSync("script", ["-qec", `"${process.execPath}" "${testBundle}" --help`, "/dev/null"], {
    env: { PATH: process.env["PATH"] ?? "", TERM: "xterm", ...env },
    encoding: "utf8"
  })

describe("svc --help", () => {
  it("prints plain text when its output is not a terminal, each flag once with its meaning, default and setting", async () => {
    const { code, stdout, stderr } = await runSvc(["--help"])
    expect(code).toBe(0)
    expect(stderr).toBe("")
    expect(stdout).not.toContain(escape)
    expect(stdout).not.toContain("A user-defined piece of text")
    expect(described(stdout)).toEqual([...serveFlags.map((flag) => `--${flag.name}`), "--help", "--version"])
    expect(stdout).toContain("  --bind <host:port>\n      Address to listen on")
    expect(stdout).toMatch(/Default:\s+127\.0\.0\.1:8080\.\s+Setting:\s+server\.bind\./)
    expect(stdout).toMatch(/--references <strict\|fhir>\n[^-]*Default:\s+strict\./)
    expect(stdout).toMatch(/--db-pool <n>\n[^-]*Default:\s+8 on Postgres, 4 on SQLite\./)
    expect(stdout).toMatch(/--export-dir <path>\n[^-]*Default:\s+\.\/export\s+beside\s+the\s+SQLite\s+file/)
    expect(stdout).toMatch(/--trace-engine\n[^-]*Not\s+in\s+this\s+build\s+yet:\s+refused\s+at\s+start-up\./)
    expect(stdout).not.toMatch(/--smart\n[^-]*Not in this build yet/)
    expect(stdout).toContain("svc migrate --status | --dry-run")
    for (const line of stdout.split("\n")) expect(line.length).toBeLessThanOrEqual(80)
  })

  it("prints the flags of svc migrate with svc migrate --help", async () => {
    const { code, stdout } = await runSvc(["migrate", "--help"])
    expect(code).toBe(0)
    expect(stdout).not.toContain(escape)
    expect(described(stdout)).toEqual([...migrateFlags.map((flag) => `--${flag.name}`), "--help", "--version"])
    expect(stdout).toContain("Exit status: 0 this build would start")
    for (const line of stdout.split("\n")) expect(line.length).toBeLessThanOrEqual(80)
  })

  it("is the same whatever other flags are given", async () => {
    const alone = await runSvc(["--help"])
    const withOthers = await runSvc(["--memory", "--no-such-flag", "-h"])
    expect(withOthers.code).toBe(0)
    expect(withOthers.stdout).toBe(alone.stdout)
  })

  it.skipIf(!hasScript)("is bold on a terminal, and plain there too under NO_COLOR", () => {
    const coloured = onTerminal({})
    expect(coloured).toContain(`${escape}1mUsage`)
    const plain = onTerminal({ NO_COLOR: "1" })
    expect(plain).not.toContain(escape)
    expect(plain.replace(/\r/g, "")).toBe(coloured.replace(/\r/g, "").replace(/\u001b\[(1|22)m/g, ""))
  })

  it("uses colour only on a terminal that is not dumb, and not when NO_COLOR has a value", () => {
    expect(useColor(true, {})).toBe(true)
    expect(useColor(false, {})).toBe(false)
    expect(useColor(undefined, {})).toBe(false)
    expect(useColor(true, { NO_COLOR: "1" })).toBe(false)
    expect(useColor(true, { NO_COLOR: "" })).toBe(true)
    expect(useColor(true, { TERM: "dumb" })).toBe(false)
  })
})

describe("svc --version", () => {
  it("prints the version alone on one line", async () => {
    const { code, stdout } = await runSvc(["--version"])
    expect(code).toBe(0)
    expect(stdout).toMatch(/^\d+\.\d+\.\d+\S*\n$/)
  })
})
