import { describe, expect, it } from "@effect/vitest"
import { databaseFlagProblem, onlyOneMessage } from "../../src/cli/databaseFlags.ts"

describe("database flags", () => {
  it("accepts one database flag with its value", () => {
    expect(databaseFlagProblem(["--sqlite", "a.sqlite", "--bind", "127.0.0.1:0"])).toBeUndefined()
    expect(databaseFlagProblem(["--memory"])).toBeUndefined()
    expect(databaseFlagProblem(["--postgres=postgres://x/y"])).toBeUndefined()
  })

  it("refuses naming more than one, or one twice", () => {
    expect(databaseFlagProblem(["--sqlite", "a", "--memory"])).toBe(onlyOneMessage)
    expect(databaseFlagProblem(["--memory", "--postgres", "postgres://x/y"])).toBe(onlyOneMessage)
    expect(databaseFlagProblem(["--sqlite", "a", "--sqlite", "b"])).toBe(onlyOneMessage)
    expect(databaseFlagProblem(["--memory", "--memory"])).toBe(onlyOneMessage)
    expect(onlyOneMessage).toBe("pass only one of --sqlite, --memory, or --postgres")
  })

  it("refuses --sqlite or --postgres directly followed by another flag", () => {
    expect(databaseFlagProblem(["--sqlite", "--bind", "127.0.0.1:0"])).toBe("--sqlite needs a value, but is followed by the flag --bind")
    expect(databaseFlagProblem(["--postgres", "--smart"])).toBe("--postgres needs a value, but is followed by the flag --smart")
    expect(databaseFlagProblem(["--sqlite", "--memory"])).toBe(onlyOneMessage)
    expect(databaseFlagProblem(["--sqlite"])).toBe("--sqlite needs a value")
  })
})
