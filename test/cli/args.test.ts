import { describe, expect, it } from "@effect/vitest"
import { parseArgs } from "../../src/cli/args.ts"
import { settingsFromFlags } from "../../src/cli/Cli.ts"

const problemOf = (args: ReadonlyArray<string>): string | undefined => {
  const parsed = parseArgs(args)
  return parsed.kind === "problem" ? parsed.message : undefined
}

const settingsOf = (args: ReadonlyArray<string>) => {
  const parsed = parseArgs(args)
  if (parsed.kind !== "run") throw new Error(`not a run: ${JSON.stringify(parsed)}`)
  return settingsFromFlags(parsed.command, parsed.given)
}

describe("the command line", () => {
  it("reads values after a space or an equals sign, and repeats of a repeatable flag", () => {
    const { named, settings } = settingsOf(["--bind=127.0.0.1:9000", "--package", "a", "--package=b", "--db-pool", "3", "--update-as-create"])
    expect(settings).toEqual({
      server: { bind: "127.0.0.1:9000" },
      conformance: { packages: ["a", "b"], update_as_create: true },
      cluster: { db_pool: 3 }
    })
    expect(named).toEqual(["--bind", "--db-pool", "--package", "--update-as-create"])
  })

  it("maps the database flags onto the database table, and --standby onto the role", () => {
    expect(settingsOf(["--sqlite", "x.sqlite"]).settings).toEqual({ database: { kind: "sqlite", sqlite_path: "x.sqlite" } })
    expect(settingsOf(["--memory", "--standby"]).settings).toEqual({ database: { kind: "memory" }, cluster: { role: "standby" } })
    expect(settingsOf(["migrate", "--status", "--postgres", "postgres://h/d"]).settings).toEqual({ database: { kind: "postgres", postgres_url: "postgres://h/d" } })
  })

  it("leaves a value that is not an integer as text, for the setting's check to name", () => {
    expect(settingsOf(["--db-pool", "many"]).settings).toEqual({ cluster: { db_pool: "many" } })
    expect(settingsOf(["--db-pool", "-2"]).settings).toEqual({ cluster: { db_pool: -2 } })
  })

  it("names an unknown flag, with the closest known one when there is one", () => {
    expect(problemOf(["--no-such-flag"])).toBe("unknown flag --no-such-flag; svc --help lists the flags")
    expect(problemOf(["--memroy"])).toBe("unknown flag --memroy; did you mean --memory?")
    expect(problemOf(["--bnid=1"])).toBe("unknown flag --bnid; did you mean --bind?")
    expect(problemOf(["-x"])).toBe("unknown flag -x; svc --help lists the flags")
  })

  it("says which command a flag of the other one belongs to", () => {
    expect(problemOf(["--status"])).toBe("--status is a flag of svc migrate (svc migrate --status ...)")
    expect(problemOf(["migrate", "--status", "--memory"])).toBe("--memory is not a flag of svc migrate")
    expect(problemOf(["migrate", "--status", "--bind", "x"])).toBe("--bind is not a flag of svc migrate")
    expect(problemOf(["migrate", "--status", "--sqlit", "x"])).toBe("unknown flag --sqlit; did you mean --sqlite?")
    expect(problemOf(["migrate", "--status", "--zzz"])).toBe("unknown flag --zzz; svc migrate --help lists the flags")
  })

  it("names a flag given without its value, or with a value it does not take", () => {
    expect(problemOf(["--references"])).toBe("--references needs a value (strict|fhir)")
    expect(problemOf(["--package", "--memory"])).toBe("--package needs a value (dir|file.tgz|name@version), but is followed by the flag --memory")
    expect(problemOf(["--bind="])).toBe("--bind needs a value (host:port)")
    expect(problemOf(["--memory=false"])).toBe("--memory takes no value, got --memory=false")
  })

  it("refuses a flag given twice unless it is repeatable, and any argument that is not a flag", () => {
    expect(problemOf(["--bind", "a:1", "--bind", "b:2"])).toBe("--bind is given twice")
    expect(problemOf(["--smart", "--smart"])).toBe("--smart is given twice")
    expect(problemOf(["--memory", "extra"])).toBe("unexpected argument 'extra': svc takes only flags (svc --help lists them)")
    expect(problemOf(["--memory", "migrate"])).toBe("migrate must come first: svc migrate --status | --dry-run [flags]")
  })

  it("keeps the database-flag rule of the spec", () => {
    expect(problemOf(["--sqlite", "a", "--memory"])).toBe("pass only one of --sqlite, --memory, or --postgres")
    expect(problemOf(["migrate", "--status", "--sqlite", "a", "--postgres", "postgres://x/y"])).toBe("pass only one of --sqlite, --memory, or --postgres")
  })

  it("answers help and version before anything else", () => {
    expect(parseArgs(["--memory", "--bogus", "--help"])).toEqual({ kind: "help", command: "svc" })
    expect(parseArgs(["migrate", "-h"])).toEqual({ kind: "help", command: "migrate" })
    expect(parseArgs(["-V"])).toEqual({ kind: "version" })
  })
})
