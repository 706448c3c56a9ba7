/**
 * Building blocks of the AppConfig schema: leaf settings that carry the phrase
 * an error message shows ("expected ...") and how an SVC_* string is coerced.
 */
import { isIPv6 } from "node:net"
import { Option, Schema, SchemaAST as AST } from "effect"
import { parseCidr } from "../http/ClientAddress.ts"

/** How an environment string is read for a leaf: numbers and booleans are parsed, lists split on commas. */
export type EnvKind = "string" | "number" | "boolean" | "list"

export const ExpectedId: unique symbol = Symbol.for("svc/config/Expected")
export const EnvKindId: unique symbol = Symbol.for("svc/config/EnvKind")

export const getExpected = (ast: AST.AST): string | undefined =>
  Option.getOrUndefined(AST.getAnnotation<string>(ExpectedId)(ast))

const getEnvKind = (ast: AST.AST): EnvKind | undefined =>
  Option.getOrUndefined(AST.getAnnotation<EnvKind>(EnvKindId)(ast))

export const leaf = <A, I>(schema: Schema.Schema<A, I>, expected: string, kind: EnvKind): Schema.Schema<A, I> =>
  schema.annotations({ [ExpectedId]: expected, [EnvKindId]: kind })

export const int = (min: number) =>
  leaf(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(min)), `an integer >= ${min}`, "number")

export const nonNegative = leaf(
  Schema.Number.pipe(Schema.finite(), Schema.nonNegative()),
  "a number >= 0",
  "number"
)

export const bool = leaf(Schema.Boolean, "true or false", "boolean")

export const text = leaf(Schema.String.pipe(Schema.minLength(1)), "a non-empty string", "string")

export const oneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  leaf(Schema.Literal(...values), `one of ${values.join(", ")}`, "string")

const stringWhere = (predicate: (s: string) => boolean, expected: string) =>
  leaf(Schema.String.pipe(Schema.filter(predicate)), expected, "string")

/** A list whose elements report their own index when one is wrong. */
export const listOf = <A>(item: Schema.Schema<A, string>, expected: string) =>
  leaf(Schema.Array(item), expected, "list")

export const parseUrl = (s: string): URL | undefined => {
  try {
    return new URL(s)
  } catch {
    return undefined
  }
}

const hasProtocol = (protocols: ReadonlyArray<string>) => (s: string): boolean => {
  const url = parseUrl(s)
  return url !== undefined && protocols.includes(url.protocol) && url.host !== ""
}

export const httpUrl = stringWhere(hasProtocol(["http:", "https:"]), "an http:// or https:// URL")

export const postgresUrl = stringWhere(
  hasProtocol(["postgres:", "postgresql:"]),
  "a postgres:// or postgresql:// URL"
)

export const isLoopbackHost = (host: string): boolean =>
  host === "localhost" || host === "[::1]" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)

/** Splits `host:port` (IPv6 hosts in brackets); undefined when it is not one. */
export const parseBind = (s: string): { readonly host: string; readonly port: number } | undefined => {
  const match = /^(\[([0-9a-fA-F:.]+)\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s)
  if (match === null) return undefined
  const [, host = "", v6, portText = ""] = match
  const port = Number(portText)
  if (port > 65535 || (v6 !== undefined && !isIPv6(v6))) return undefined
  return { host, port }
}

export const bind = stringWhere((s) => parseBind(s) !== undefined, "host:port (like 127.0.0.1:8080 or [::1]:8080)")

export const isCidr = (s: string): boolean => parseCidr(s) !== undefined

export const cidr = stringWhere(isCidr, "a CIDR network (like 10.0.0.0/8 or fd00::/8)")

export const fhirReference = stringWhere(
  (s) => /^[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}$/.test(s),
  "a reference Resource/id (like Practitioner/123)"
)

/** A leaf setting found by walking the schema: its path and how its env string is coerced. */
export interface Leaf {
  readonly path: ReadonlyArray<string>
  readonly kind: EnvKind
}

/** Every scalar and list setting of a struct schema; tables keyed by the user (clients, claims) are not leaves. */
export const leavesOf = (ast: AST.AST, path: ReadonlyArray<string> = []): ReadonlyArray<Leaf> => {
  const kind = getEnvKind(ast)
  if (kind !== undefined) return [{ path, kind }]
  switch (ast._tag) {
    case "Transformation":
    case "Refinement":
      return leavesOf(ast.from, path)
    case "Union":
      return ast.types.flatMap((member) => leavesOf(member, path))
    case "TypeLiteral":
      return ast.propertySignatures.flatMap((p) => leavesOf(p.type, [...path, String(p.name)]))
    default:
      return []
  }
}

/** Every dotted setting name a struct schema knows, tables included (for "did you mean"). */
export const settingNames = (ast: AST.AST, prefix = ""): ReadonlyArray<string> => {
  switch (ast._tag) {
    case "Transformation":
    case "Refinement":
      return settingNames(ast.from, prefix)
    case "Union":
      return ast.types.flatMap((member) => settingNames(member, prefix))
    case "TypeLiteral":
      return ast.propertySignatures.flatMap((p) => {
        const name = `${prefix}${String(p.name)}`
        return [name, ...settingNames(p.type, `${name}.`)]
      })
    default:
      return []
  }
}
