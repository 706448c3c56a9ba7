/**
 * One search clause as SQL over the index tables (migration 0003): every value of a clause is one
 * alternative (OR); a clause becomes `r.rkey IN (...)`, or `NOT IN` for `:not`/`:not-in`.
 * The semantics of prefixes and modifiers are FHIR R4's (https://hl7.org/fhir/R4/search.html);
 * docs/search.md records the choices it leaves open.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { toCanonical } from "../../terminology/ucum.ts"
import { normalize, words } from "../extract/values.ts"
import { indexKey, isLong } from "../indexKey.ts"
import type { Clause, NearValue, Prefix, QuantityValue, Value } from "../parse/SearchRequest.ts"

type Fragment = Statement.Fragment

/**
 * A column of the row a value is matched against: a table column, or a field of a composite's part.
 * `keyed`: the text columns hold bounded keys with the whole text in a `_full` twin (../indexKey.ts);
 * a composite's parts hold whole texts.
 */
type Column = ((name: string, numeric?: boolean) => Fragment) & { readonly keyed: boolean }

const column = (keyed: boolean, f: (name: string, numeric?: boolean) => Fragment): Column => Object.assign(f, { keyed })

/** `name = text` on a text column: on a keyed column, the key finds the rows and a long text is checked whole. */
const textEquals = (sql: SqlClient.SqlClient, col: Column, name: string, text: string): Fragment =>
  col.keyed && isLong(text) ? sql`(${col(name)} = ${indexKey(text)} AND ${col(`${name}_full`)} = ${text})` : sql`${col(name)} = ${text}`

/** The whole text of a keyed column, for what its key cannot answer (`LIKE`, `substr`). */
const wholeText = (sql: SqlClient.SqlClient, col: Column, name: string): Fragment =>
  col.keyed ? sql`coalesce(${col(`${name}_full`)}, ${col(name)})` : col(name)

/** `name` starts with `prefix` (a half-open range, which the lookup index answers), as with `textEquals`. */
const textStarts = (sql: SqlClient.SqlClient, col: Column, name: string, prefix: string): Fragment => {
  const range = (c: Fragment, low: string) => sql`(${c} >= ${low} AND ${c} < ${`${low}\uffff`})`
  if (!col.keyed || !isLong(prefix)) return range(col(name), prefix)
  // Only cut keys can start with a prefix longer than a key: they all equal the prefix's key.
  return sql`(${col(name)} = ${indexKey(prefix)} AND ${range(col(`${name}_full`), prefix)})`
}

/** The JSON path of a column inside a composite part (an IndexRow, extract/IndexRow.ts). */
const partFields: Record<string, ReadonlyArray<string>> = {
  target_type: ["targetType"],
  target_id: ["targetId"],
  canonical_value: ["canonicalValue"],
  canonical_unit: ["canonicalUnit"],
  identifier_system: ["identifier", "system"],
  identifier_value: ["identifier", "value"],
  type_system: ["identifierType", "system"],
  type_code: ["identifierType", "code"]
}

const tableColumns = (sql: SqlClient.SqlClient): Column => column(true, (name) => sql`${sql(name)}`)

const partColumns = (sql: SqlClient.SqlClient, index: number): Column => column(false, (name, numeric) => {
  const path = partFields[name] ?? [name]
  return sql.onDialectOrElse({
    pg: () => {
      const steps = path.map((field, i) => `${i === path.length - 1 ? "->>" : "->"}'${field}'`).join("")
      const text = `((parts::jsonb)->${index}${steps})`
      return sql.literal(numeric ? `(${text})::double precision` : text)
    },
    orElse: () => sql.literal(`json_extract(parts, '$[${index}].${path.join(".")}')`)
  })
})

/**
 * A date range `[low, high)` of the resource against the query's range, by prefix, as R4 words it:
 * `gt` the range above the search value overlaps the target, `ge` that or `eq`, `eq` the search range
 * contains the target's, `sa`/`eb` no overlap and after/before, `ap` overlap within 10% of the distance to now.
 */
const dateCondition = (sql: SqlClient.SqlClient, prefix: Prefix, low: number, high: number, rLow: Fragment, rHigh: Fragment, now: number): Fragment => {
  const within = sql`(${rLow} >= ${low} AND ${rHigh} <= ${high})`
  switch (prefix) {
    case "eq":
      return within
    case "ne":
      return sql`NOT ${within}`
    case "gt":
      return sql`${rHigh} > ${high}`
    case "lt":
      return sql`${rLow} < ${low}`
    case "ge":
      return sql`(${rHigh} > ${high} OR ${within})`
    case "le":
      return sql`(${rLow} < ${low} OR ${within})`
    case "sa":
      return sql`${rLow} >= ${high}`
    case "eb":
      return sql`${rHigh} <= ${low}`
    case "ap": {
      // Whole units: the columns are integers.
      const slack = Math.round(Math.abs(now - (low + high) / 2) * 0.1)
      return sql`(${rHigh} > ${low - slack} AND ${rLow} < ${high + slack})`
    }
  }
}

/**
 * A number the resource holds (a point) against the query's value and the range its significant figures
 * imply: `eq` inside the range, `gt`/`lt`/`ge`/`le` against the value as written, `sa`/`eb` beyond the
 * whole range, `ap` within 10% of the value (at least the implied range).
 */
const pointCondition = (sql: SqlClient.SqlClient, prefix: Prefix, value: number, low: number, high: number, column: Fragment): Fragment => {
  switch (prefix) {
    case "eq":
      return sql`(${column} >= ${low} AND ${column} < ${high})`
    case "ne":
      return sql`NOT (${column} >= ${low} AND ${column} < ${high})`
    case "gt":
      return sql`${column} > ${value}`
    case "lt":
      return sql`${column} < ${value}`
    case "ge":
      return sql`${column} >= ${value}`
    case "le":
      return sql`${column} <= ${value}`
    case "sa":
      return sql`${column} >= ${high}`
    case "eb":
      return sql`${column} < ${low}`
    case "ap": {
      const slack = Math.max(Math.abs(value) * 0.1, (high - low) / 2)
      return sql`(${column} >= ${value - slack} AND ${column} <= ${value + slack})`
    }
  }
}

const ucum = "http://unitsofmeasure.org"

/** A quantity: by value and unit as written, or in UCUM base units when both sides convert. */
const quantityCondition = (sql: SqlClient.SqlClient, value: QuantityValue, col: Column): Fragment => {
  const asWritten = [pointCondition(sql, value.prefix, value.value, value.low, value.high, col("value", true))]
  if (value.code !== undefined) asWritten.push(sql`${col("unit")} = ${value.code}`)
  if (value.system !== undefined) asWritten.push(sql`${col("system")} = ${value.system}`)
  const plain = sql.and(asWritten)
  if (value.code === undefined || (value.system !== undefined && value.system !== ucum)) return plain
  const point = toCanonical(value.value, value.code)
  const low = toCanonical(value.low, value.code)
  const high = toCanonical(value.high, value.code)
  if (point === undefined || low === undefined || high === undefined) return plain
  const canonical = sql.and([
    sql`${col("canonical_unit")} = ${point.unit}`,
    pointCondition(sql, value.prefix, point.value, Math.min(low.value, high.value), Math.max(low.value, high.value), col("canonical_value", true))
  ])
  return sql`(${plain} OR ${canonical})`
}

/** Metres per degree of latitude (and of longitude at the equator). */
const metresPerDegree = 111_320
/** The distance a `near` without one means. */
export const defaultNearMetres = 1000

/** Within the distance of the point: a bounding box on the index, then the equirectangular distance. */
const nearCondition = (sql: SqlClient.SqlClient, value: NearValue, col: Column): Fragment => {
  const metres = value.meters ?? defaultNearMetres
  const cos = Math.cos((value.latitude * Math.PI) / 180)
  const dLat = metres / metresPerDegree
  const dLon = cos < 1e-6 ? 360 : metres / (metresPerDegree * cos)
  const lat = col("latitude", true)
  const lon = col("longitude", true)
  const y = metresPerDegree
  const x = metresPerDegree * cos
  return sql`(${lat} BETWEEN ${value.latitude - dLat} AND ${value.latitude + dLat}
    AND ${lon} BETWEEN ${value.longitude - dLon} AND ${value.longitude + dLon}
    AND ((${lat} - ${value.latitude}) * ${y}) * ((${lat} - ${value.latitude}) * ${y})
      + ((${lon} - ${value.longitude}) * ${x}) * ((${lon} - ${value.longitude}) * ${x}) <= ${metres * metres})`
}

export const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`)


const text = (sql: SqlClient.SqlClient, value: string): Fragment => sql`CAST(${value} AS TEXT)`

/** The condition on one index row for one value. */
const valueCondition = (sql: SqlClient.SqlClient, clause: Clause, value: Value, col: Column, paramType: string, now: number): Fragment => {
  const modifier = clause.modifier?.kind
  switch (value.kind) {
    case "token": {
      if (paramType === "reference") {
        // `:identifier` on a reference parameter: Reference.identifier.
        const parts: Array<Fragment> = []
        if (value.code !== undefined) parts.push(sql`${col("identifier_value")} = ${value.code}`)
        if (value.system === "") parts.push(sql`${col("identifier_system")} IS NULL`)
        else if (value.system !== undefined) parts.push(sql`${col("identifier_system")} = ${value.system}`)
        return parts.length === 0 ? sql`${col("identifier_value")} IS NOT NULL` : sql.and(parts)
      }
      const parts: Array<Fragment> = []
      if (value.code !== undefined) parts.push(textEquals(sql, col, "value", value.code))
      if (value.system === "") parts.push(sql`${col("system")} IS NULL`)
      else if (value.system !== undefined) parts.push(textEquals(sql, col, "system", value.system))
      return parts.length === 0 ? sql`1 = 1` : sql.and(parts)
    }
    case "codes": {
      // A row without a system is a `code` element: its system is the one its binding implies.
      if (value.codes.length === 0) return sql`1 = 0`
      const bySystem = new Map<string, Array<string>>()
      for (const { system, code } of value.codes) {
        const codes = bySystem.get(system)
        if (codes) codes.push(code)
        else bySystem.set(system, [code])
      }
      return sql.or([...bySystem].map(([system, codes]) => {
        const short = codes.filter((code) => !col.keyed || !isLong(code))
        const long = codes.filter((code) => col.keyed && isLong(code)).map((code) => textEquals(sql, col, "value", code))
        const matches = sql.or([...(short.length > 0 ? [sql`${col("value")} IN ${sql.in(short)}`] : []), ...long])
        return sql`((${textEquals(sql, col, "system", system)} OR ${col("system")} IS NULL) AND ${matches})`
      }))
    }
    case "of-type":
      return sql`(${col("type_system")} = ${value.system} AND ${col("type_code")} = ${value.code} AND ${textEquals(sql, col, "value", value.value)})`
    case "string": {
      const normalized = normalize(value.value)
      if (modifier === "text") {
        // Token `:text`: the display text (as `words` when indexed) at the start of any of its words.
        const start = escapeLike(words(value.value))
        return sql`(${col("display")} LIKE ${`${start}%`} ESCAPE '\\' OR ${col("display")} LIKE ${`% ${start}%`} ESCAPE '\\')`
      }
      if (modifier === "exact") return sql`${col("exact")} = ${value.value}`
      if (modifier === "contains") return sql`${wholeText(sql, col, "normalized")} LIKE ${`%${escapeLike(normalized)}%`} ESCAPE '\\'`
      return textStarts(sql, col, "normalized", normalized)
    }
    case "uri": {
      if (paramType !== "reference" && modifier === undefined) return textEquals(sql, col, "value", value.value)
      const column = paramType === "reference" ? col("url") : wholeText(sql, col, "value")
      if (modifier === "below") {
        const base = value.value.replace(/\/+$/, "")
        return sql`(${column} = ${value.value} OR ${column} = ${base} OR ${column} LIKE ${`${escapeLike(base)}/%`} ESCAPE '\\')`
      }
      if (modifier === "above") {
        const q = text(sql, value.value)
        return sql`(${column} = ${value.value} OR (length(${column}) < length(${q}) AND substr(${q}, 1, length(${column})) = ${column}
          AND (substr(${q}, length(${column}) + 1, 1) = '/' OR substr(${column}, length(${column}), 1) = '/')))`
      }
      return sql`${column} = ${value.value}`
    }
    case "date":
      return dateCondition(sql, value.prefix, value.low, value.high, col("low", true), col("high", true), now)
    case "number":
      return pointCondition(sql, value.prefix, value.value, value.low, value.high, col("value", true))
    case "quantity":
      return quantityCondition(sql, value, col)
    case "reference": {
      if (value.url !== undefined) {
        const url = sql`${col("url")} = ${value.url}`
        return value.version === undefined ? url : sql`(${url} AND ${col("version")} = ${value.version})`
      }
      if (value.types.length === 0) return sql`${col("target_id")} = ${value.id ?? ""}`
      return sql`(${col("target_id")} = ${value.id ?? ""} AND ${col("target_type")} IN ${sql.in(value.types)})`
    }
    case "near":
      return nearCondition(sql, value, col)
    case "composite": {
      const { modifier: _, ...plain } = clause
      return sql.and(value.parts.map((part, i) => valueCondition(sql, plain, part.value, partColumns(sql, i), part.value.kind, now)))
    }
    case "id":
    case "missing":
      return sql`1 = 0`
  }
}

const tableOf: Record<string, string> = {
  token: "search_token",
  string: "search_string",
  date: "search_date",
  number: "search_number",
  quantity: "search_quantity",
  reference: "search_reference",
  uri: "search_uri",
  composite: "search_composite",
  special: "search_near"
}

/** Words of a `_content` or `_text` value: each must appear (case-insensitive), in any order. */
const wordsCondition = (sql: SqlClient.SqlClient, column: Fragment, value: string): Fragment => {
  const words = value.toLowerCase().split(/\s+/).filter((word) => word !== "")
  if (words.length === 0) return sql`1 = 1`
  return sql.and(words.map((word) => sql`lower(${column}) LIKE ${`%${escapeLike(word)}%`} ESCAPE '\\'`))
}

const stringsOf = (clause: Clause): ReadonlyArray<string> =>
  clause.values.flatMap((value) => (value.kind === "string" ? [value.value] : value.kind === "uri" ? [value.value] : []))

/** `_content`, `_text` and `_list`: read from the stored resource and from List resources, not from index rows. */
const storedCondition = (sql: SqlClient.SqlClient, type: string, clause: Clause): Fragment | undefined => {
  switch (clause.code) {
    case "_content":
    case "_text": {
      const column = clause.code === "_content"
        ? sql`v.content`
        : sql.onDialectOrElse({ pg: () => sql`((v.content::jsonb)->'text'->>'div')`, orElse: () => sql`json_extract(v.content, '$.text.div')` })
      const alternatives = stringsOf(clause).map((value) => wordsCondition(sql, column, value))
      return sql`EXISTS (SELECT 1 FROM resource_versions v WHERE v.rkey = r.rkey AND v.version = r.version AND ${sql.or(alternatives)})`
    }
    case "_list": {
      const lists = stringsOf(clause)
      return sql`r.id IN (SELECT i.target_id FROM search_reference i JOIN resources l ON l.rkey = i.rkey
        WHERE i.type = 'List' AND i.param = 'item' AND i.target_type = ${type} AND l.type = 'List' AND NOT l.deleted AND ${sql.in("l.id", lists)})`
    }
    default:
      return undefined
  }
}

/** `_lastUpdated` is the commit timestamp (µs) of the current version: no index rows needed. */
const lastUpdatedCondition = (sql: SqlClient.SqlClient, clause: Clause, now: number): Fragment =>
  sql.or(clause.values.map((value) => {
    if (value.kind !== "date") return sql`1 = 0`
    return dateCondition(sql, value.prefix, value.low * 1000, value.high * 1000, sql`r.commit_ts`, sql`(r.commit_ts + 1)`, now * 1000)
  }))

/** Whether the clause's condition is `r.rkey IN (rows of the index for this type)`: it keeps to the type by itself. */
export const narrowsToType = (clause: Clause): boolean => {
  const first = clause.values[0]
  if (clause.exclude || first === undefined || first.kind === "missing" || first.kind === "id") return false
  return !["_lastUpdated", "_content", "_text", "_list"].includes(clause.code)
}

/**
 * How selective a clause that narrows to the type is likely to be, lower first: the one that drives a search
 * is read as a list of row keys, the others are checked per candidate through the index's row-key index.
 */
export const selectivity = (clause: Clause, paramType: string): number => {
  const modifier = clause.modifier?.kind
  if (modifier === "text" || modifier === "contains" || modifier === "below" || modifier === "above") return 3
  switch (paramType) {
    case "token":
    case "reference":
    case "uri":
      return clause.values[0]?.kind === "codes" ? 2 : 0
    case "string":
      return 1
    case "date":
      return 4
    default:
      return 2
  }
}

/**
 * The condition a clause puts on `r` (the resources table) for resources of `type`. `drive`: the clause is
 * read as `r.rkey IN (index rows)`, the list the database starts from; otherwise as an EXISTS per candidate.
 */
export const clauseCondition = (
  sql: SqlClient.SqlClient,
  type: string,
  clause: Clause,
  paramType: string,
  /** The current time in epoch milliseconds, from Effect's Clock: `ap` on dates is relative to it. */
  now: number,
  drive = true
): Fragment => {
  const first = clause.values[0]
  if (clause.values.length > 0 && clause.values.every((value) => value.kind === "id")) {
    const ids = clause.values.map((value) => (value.kind === "id" ? value.id : ""))
    return clause.exclude ? sql`NOT ${sql.in("r.id", ids)}` : sql.in("r.id", ids)
  }
  if (clause.code === "_lastUpdated" && first?.kind !== "missing") {
    const condition = lastUpdatedCondition(sql, clause, now)
    return clause.exclude ? sql`NOT ${condition}` : condition
  }
  if (first?.kind !== "missing") {
    const stored = storedCondition(sql, type, clause)
    if (stored !== undefined) return clause.exclude ? sql`NOT ${stored}` : stored
  }
  const table = sql(tableOf[paramType] ?? "search_token")
  if (first?.kind === "missing") {
    const exists = sql`EXISTS (SELECT 1 FROM ${table} i WHERE i.rkey = r.rkey AND i.param = ${clause.code})`
    return first.missing ? sql`NOT ${exists}` : exists
  }
  const col = tableColumns(sql)
  const alternatives = sql.or(clause.values.map((value) => valueCondition(sql, clause, value, col, paramType, now)))
  if (drive && !clause.exclude) return sql`r.rkey IN (SELECT rkey FROM ${table} WHERE type = ${type} AND param = ${clause.code} AND ${alternatives})`
  const exists = sql`EXISTS (SELECT 1 FROM ${table} i WHERE i.rkey = r.rkey AND i.param = ${clause.code} AND ${alternatives})`
  return clause.exclude ? sql`NOT ${exists}` : exists
}

/**
 * The row keys of `type`'s index rows that a clause of one equality value matches, as a subquery whose rows
 * come in row-key order straight from the lookup index (every column before `rkey` is fixed): a token
 * `system|code`, a reference `Type/id`, a plain uri. Undefined for every other clause. A resource may have
 * several such rows (the same code twice), so a reader of these rows groups them by `rkey`.
 */
export const orderedLookup = (sql: SqlClient.SqlClient, type: string, clause: Clause, paramType: string): Fragment | undefined => {
  const [value, ...more] = clause.values
  if (value === undefined || more.length > 0 || clause.exclude) return undefined
  const modifier = clause.modifier?.kind
  const plain = modifier === undefined
  const ordered =
    (paramType === "token" && plain && value.kind === "token" && value.code !== undefined && value.system !== undefined && value.system !== "") ||
    (paramType === "reference" && (plain || modifier === "type") && value.kind === "reference" && value.url === undefined && value.id !== undefined && value.types.length === 1) ||
    (paramType === "uri" && plain && value.kind === "uri")
  if (!ordered || !narrowsToType(clause)) return undefined
  const condition = valueCondition(sql, clause, value, tableColumns(sql), paramType, 0)
  return sql`SELECT rkey FROM ${sql(tableOf[paramType]!)} WHERE type = ${type} AND param = ${clause.code} AND ${condition}`
}
