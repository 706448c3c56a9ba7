/**
 * The decision table of docs/validation.md covers the HL7 reference validator's whole catalogue of checks:
 * every message key has exactly one row; a row that says the check is made names the source file that makes
 * it and a test (file and title) that shows it.
 */
import { existsSync, readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

const root = new URL("../../", import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), "utf8")

const keys = read("test/support/validatorMessageKeys.txt").split("\n").filter((line) => line !== "" && !line.startsWith("#"))

interface Row {
  readonly key: string
  readonly decision: string
  readonly why: string
  readonly where: string
  readonly test: string
}

const rows = (): ReadonlyArray<Row> => {
  const doc = read("docs/validation.md")
  const start = doc.indexOf("\n## Decision table")
  expect(start).toBeGreaterThan(0)
  const end = doc.indexOf("\n## ", start + 5)
  const section = doc.slice(start, end < 0 ? undefined : end)
  return section.split("\n")
    .filter((line) => line.startsWith("| ") && !line.startsWith("| Key ") && !line.startsWith("|---"))
    .map((line) => {
      const cells = line.slice(1, line.endsWith("|") ? -1 : undefined).split("|").map((cell) => cell.trim())
      return { key: cells[0]!.replace(/`/g, ""), decision: cells[1] ?? "", why: cells[2] ?? "", where: cells[3] ?? "", test: cells[4] ?? "" }
    })
}

const decisions = new Set(["checked", "partly", "not yet", "not applicable", "not here"])

describe("the decision table of docs/validation.md", () => {
  it("has one row for every key of the reference validator's catalogue, and no other", () => {
    const table = rows()
    const seen = new Map<string, number>()
    for (const row of table) seen.set(row.key, (seen.get(row.key) ?? 0) + 1)
    expect(keys.length).toBeGreaterThan(1500)
    expect(keys.filter((key) => !seen.has(key))).toEqual([])
    expect([...seen].filter(([, count]) => count > 1).map(([key]) => key)).toEqual([])
    expect(table.filter((row) => !keys.includes(row.key)).map((row) => row.key)).toEqual([])
  })

  it("states the number of rows of each decision as the table has them", () => {
    const doc = read("docs/validation.md")
    for (const decision of decisions) {
      const stated = new RegExp(`- \\*\\*${decision}\\*\\* \\((\\d+)\\)`).exec(doc)
      expect(stated, decision).not.toBeNull()
      expect(Number(stated![1]), decision).toBe(rows().filter((row) => row.decision === decision).length)
    }
  })

  it("gives each row a decision and a reason", () => {
    const bad = rows().filter((row) => !decisions.has(row.decision) || row.why === "" || row.why === "-")
    expect(bad.map((row) => `${row.key}: ${row.decision}`)).toEqual([])
  })

  it("names, for each check made, a source file that exists and a test that exists", () => {
    const problems: Array<string> = []
    const titles = new Map<string, string>()
    for (const row of rows()) {
      if (row.decision !== "checked" && row.decision !== "partly") continue
      const files = row.where.split(/,\s*/).map((file) => file.replace(/`/g, ""))
      for (const file of files) if (!/^src\/\S+\.ts$/.test(file) || !existsSync(new URL(file, root))) problems.push(`${row.key}: no source file ${file}`)
      const test = /^`?(test\/\S+\.ts)`?:\s*"(.+)"$/.exec(row.test)
      if (test === null) {
        problems.push(`${row.key}: the test is not named as file: "title" (${row.test})`)
        continue
      }
      const [, file, title] = test
      if (!existsSync(new URL(file!, root))) {
        problems.push(`${row.key}: no test file ${file}`)
        continue
      }
      const text = titles.get(file!) ?? read(file!)
      titles.set(file!, text)
      if (!text.split("\n").some((line) => line.includes(title!) && /\(\s*["'`]/.test(line))) problems.push(`${row.key}: no test titled "${title}" in ${file}`)
    }
    expect(problems).toEqual([])
  })
})
