/**
 * Turns a schema failure into lines a user can act on:
 * `<file|variable|flag>: <setting>: expected <what>, got <value>`.
 */
import { ParseResult, SchemaAST as AST } from "effect"
import type { Origin, RawSettings } from "./merge.ts"
import { isTable } from "./merge.ts"
import { redactUrl } from "./Secrets.ts"
import { getExpected } from "./Setting.ts"

interface Problem {
  readonly path: ReadonlyArray<PropertyKey>
  readonly expected: string | undefined // undefined: the key is not a setting
}

const asArray = <A>(x: A | ReadonlyArray<A>): ReadonlyArray<A> => (Array.isArray(x) ? x : [x as A])

const fallbackExpected = (ast: AST.AST): string =>
  ast._tag === "TypeLiteral" ? "a table" : ast._tag === "TupleType" ? "a list" : String(ast)

const problems = (issue: ParseResult.ParseIssue, path: ReadonlyArray<PropertyKey>): ReadonlyArray<Problem> => {
  switch (issue._tag) {
    case "Pointer":
      return problems(issue.issue, [...path, ...asArray(issue.path)])
    case "Composite": {
      // A union of literals fails as a whole; a list or table fails element by element.
      const expected = issue.ast._tag === "Union" ? getExpected(issue.ast) : undefined
      if (expected !== undefined) return [{ path, expected }]
      return asArray(issue.issues).flatMap((inner) => problems(inner, path))
    }
    case "Unexpected":
      return [{ path, expected: undefined }]
    case "Missing":
      return [{ path, expected: "a value" }]
    case "Refinement":
    case "Transformation": {
      const expected = getExpected(issue.ast)
      return expected !== undefined ? [{ path, expected }] : problems(issue.issue, path)
    }
    case "Type":
    case "Forbidden":
      return [{ path, expected: getExpected(issue.ast) ?? fallbackExpected(issue.ast) }]
  }
}

/** `rate_limit.clients."my.app".burst`, `server.trusted_proxy_peers[1]` */
export const settingPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((key, i) =>
      typeof key === "number"
        ? `[${key}]`
        : `${i === 0 ? "" : "."}${/^[A-Za-z0-9_-]+$/.test(String(key)) ? String(key) : JSON.stringify(String(key))}`
    )
    .join("")

/** Flags named in the spec's command line, to name the flag a bad value came from. */
const FLAGS: Record<string, string> = {
  "server.bind": "--bind",
  "server.public_url": "--public-url",
  "database.kind": "--sqlite/--memory/--postgres",
  "database.sqlite_path": "--sqlite",
  "database.postgres_url": "--postgres",
  "cluster.role": "--role",
  "cluster.primary_url": "--primary-url",
  "cluster.db_pool": "--db-pool",
  "conformance.reference_policy": "--references",
  "conformance.update_as_create": "--update-as-create",
  "conformance.packages": "--package",
  "smart.enabled": "--smart",
  "smart.patient": "--smart-patient",
  "smart.encounter": "--smart-encounter",
  "smart.fhir_user": "--smart-fhir-user",
  "smart.demo_login": "--smart-demo-login",
  "smart.oidc.issuer": "--oidc-issuer",
  "smart.oidc.client_id": "--oidc-client-id",
  "export.dir": "--export-dir",
  "terminology.urls": "--terminology",
  "features.trace_engine": "--trace-engine",
  "features.sdc_archiver": "--sdc-archiver"
}

/** Names the source of a setting: `svc.toml: server.bind`, `SVC_SERVER_BIND`, `--bind`. */
export const where = (origin: Origin | undefined, path: ReadonlyArray<PropertyKey>): string => {
  const setting = settingPath(path)
  switch (origin?._tag) {
    case "File":
      return `${origin.file}: ${setting}`
    case "Env":
      return origin.variable
    case "Flag": {
      const flag = FLAGS[settingPath(path.filter((key) => typeof key === "string"))]
      return flag !== undefined ? flag : `command line setting ${setting}`
    }
    case undefined:
      return setting
  }
}

export const showValue = (value: unknown): string => {
  const text = typeof value === "string"
    ? JSON.stringify(redactUrl(value))
    : value instanceof Date
    ? String(value)
    : isTable(value)
    ? "a table"
    : Array.isArray(value)
    ? redactUrl(JSON.stringify(value))
    : String(value)
  return text.length > 100 ? `${text.slice(0, 97)}...` : text
}

/** Secrets that people try to put in the file, and the variable that carries each. */
const SECRET_SETTINGS: Record<string, string> = {
  "smart.oidc.client_secret": "SVC_OIDC_CLIENT_SECRET",
  "smart.dcr_token": "SVC_SMART_DCR_TOKEN",
  "smart.confidential_secret": "SVC_SMART_CONFIDENTIAL_SECRET",
  "audit.key": "SVC_AUDIT_KEY",
  "conformance.s3_access_key_id": "SVC_S3_ACCESS_KEY_ID",
  "conformance.s3_secret_access_key": "SVC_S3_SECRET_ACCESS_KEY"
}

/** Edit distance, for "did you mean" suggestions. */
export const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1)
      )
    }
    previous = current
  }
  return previous[b.length] ?? 0
}

const suggestion = (path: ReadonlyArray<PropertyKey>, known: ReadonlyArray<string>): string => {
  const parent = settingPath(path.slice(0, -1))
  const name = String(path[path.length - 1])
  const siblings = known.filter((k) => k.startsWith(parent === "" ? "" : `${parent}.`))
    .map((k) => k.slice(parent === "" ? 0 : parent.length + 1).split(".")[0] ?? "")
  const best = [...new Set(siblings)].map((s) => [s, distance(s, name)] as const)
    .filter(([, d]) => d <= 2)
    .sort((a, b) => a[1] - b[1])[0]
  if (best === undefined) return ""
  return path.length === 1 ? ` (did you mean [${best[0]}]?)` : ` (did you mean ${parent}.${best[0]}?)`
}

const describeProblem = (problem: Problem, settings: RawSettings, known: ReadonlyArray<string>): string => {
  const origin = settings.originOf(problem.path)
  if (problem.expected !== undefined) {
    return `${where(origin, problem.path)}: expected ${problem.expected}, got ${showValue(settings.get(problem.path))}`
  }
  const setting = settingPath(problem.path)
  const source = origin?._tag === "File" ? origin.file : origin?._tag === "Env" ? origin.variable : "command line"
  const secretVariable = SECRET_SETTINGS[setting]
  if (secretVariable !== undefined) {
    return `${source}: ${setting}: secrets are not read from the configuration; set ${secretVariable} in the environment`
  }
  const what = problem.path.length === 1 ? `unknown section [${setting}]` : `unknown setting ${setting}`
  return `${source}: ${what}${suggestion(problem.path, known)}`
}

const MAX_LINES = 5

/** One line per problem (at most five), each naming its source, setting and expectation. */
export const describeParseError = (
  error: ParseResult.ParseError,
  settings: RawSettings,
  known: ReadonlyArray<string>
): string => {
  const lines = [...new Set(problems(error.issue, []).map((p) => describeProblem(p, settings, known)))]
  const more = lines.length > MAX_LINES ? [`... and ${lines.length - MAX_LINES} more`] : []
  return [...lines.slice(0, MAX_LINES), ...more].join("\n")
}

/** Whether every value the schema refused was given by a command-line flag. */
export const onlyFlagsAtFault = (error: ParseResult.ParseError, settings: RawSettings): boolean =>
  problems(error.issue, []).every((problem) => settings.originOf(problem.path)?._tag === "Flag")
