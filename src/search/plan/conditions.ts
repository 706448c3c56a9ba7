/**
 * One search clause as SQL over the index tables (migration 0003): every value of a clause is one
 * alternative (OR); a clause becomes `r.rkey IN (...)`, or `NOT IN` for `:not`/`:not-in`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import type { Clause, Prefix, Value } from "../parse/SearchRequest.ts"

type Fragment = Statement.Fragment

/** A range [low, high) of the resource against the query's range, by prefix (search.html#prefix). */
const rangeCondition = (sql: SqlClient.SqlClient, prefix: Prefix, low: number, high: number, columns: { low: string; high: string }): Fragment => {
  const rLow = sql(columns.low)
  const rHigh = sql(columns.high)
  switch (prefix) {
    case "eq":
      return sql`(${rLow} >= ${low} AND ${rHigh} <= ${high})`
    case "ne":
      return sql`NOT (${rLow} >= ${low} AND ${rHigh} <= ${high})`
    case "gt":
      return sql`${rHigh} > ${high}`
    case "lt":
      return sql`${rLow} < ${low}`
    case "ge":
      return sql`${rHigh} > ${low}`
    case "le":
      return sql`${rLow} < ${high}`
    case "sa":
      return sql`${rLow} >= ${high}`
    case "eb":
      return sql`${rHigh} <= ${low}`
    case "ap": {
      // Approximately: within 10% of the query's span either side.
      const slack = Math.max((high - low) * 0.1, 1)
      return sql`(${rHigh} > ${low - slack} AND ${rLow} < ${high + slack})`
    }
  }
}

const escapeLike = (text: string): string => text.replace(/[\\%_]/g, (c) => `\\${c}`)

/** The condition on one index row for one value, or undefined when the value needs another table. */
const valueCondition = (sql: SqlClient.SqlClient, clause: Clause, value: Value): Fragment => {
  const modifier = clause.modifier?.kind
  switch (value.kind) {
    case "token": {
      if (modifier === "text") return sql`lower(display) LIKE ${`%${escapeLike(value.code ?? "").toLowerCase()}%`} ESCAPE '\\'`
      const parts: Array<Fragment> = []
      if (value.code !== undefined) parts.push(sql`value = ${value.code}`)
      if (value.system === "") parts.push(sql`system IS NULL`)
      else if (value.system !== undefined) parts.push(sql`system = ${value.system}`)
      return parts.length === 0 ? sql`1 = 1` : sql.and(parts)
    }
    case "of-type":
      return sql`(type_system = ${value.system} AND type_code = ${value.code} AND value = ${value.value})`
    case "string": {
      const normalized = value.value.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase().replace(/\s+/g, " ").trim()
      if (modifier === "exact") return sql`exact = ${value.value}`
      if (modifier === "contains") return sql`normalized LIKE ${`%${escapeLike(normalized)}%`} ESCAPE '\\'`
      return sql`(normalized >= ${normalized} AND normalized < ${`${normalized}\uffff`})`
    }
    case "uri":
      if (modifier === "below") return sql`value LIKE ${`${escapeLike(value.value)}%`} ESCAPE '\\'`
      if (modifier === "above") return sql`${value.value} LIKE (value || '%')`
      return sql`value = ${value.value}`
    case "date":
      return rangeCondition(sql, value.prefix, value.low, value.high, { low: "low", high: "high" })
    case "number":
      return rangeCondition(sql, value.prefix, value.low, value.high, { low: "low", high: "high" })
    case "quantity": {
      const range = rangeCondition(sql, value.prefix, value.low, value.high, { low: "value", high: "value" })
      const unit = value.code === undefined ? sql`1 = 1` : sql`(unit = ${value.code} OR canonical_unit = ${value.code})`
      const system = value.system === undefined ? sql`1 = 1` : sql`system = ${value.system}`
      return sql`(${range} AND ${unit} AND ${system})`
    }
    case "reference": {
      if (modifier === "identifier") return sql`identifier_value = ${value.id ?? value.url ?? ""}`
      if (value.url !== undefined) return sql`url = ${value.url}`
      if (value.types.length === 0) return sql`target_id = ${value.id ?? ""}`
      return sql`(target_id = ${value.id ?? ""} AND ${sql.in("target_type", value.types)})`
    }
    default:
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

/** The condition a clause puts on `r` (the resources table) for resources of `type`. */
export const clauseCondition = (sql: SqlClient.SqlClient, type: string, clause: Clause, paramType: string): Fragment => {
  const first = clause.values[0]
  if (clause.values.length > 0 && clause.values.every((value) => value.kind === "id")) {
    const ids = clause.values.map((value) => (value.kind === "id" ? value.id : ""))
    return clause.exclude ? sql`NOT ${sql.in("r.id", ids)}` : sql.in("r.id", ids)
  }
  const table = sql(tableOf[paramType] ?? "search_token")
  if (first?.kind === "missing") {
    const exists = sql`EXISTS (SELECT 1 FROM ${table} i WHERE i.rkey = r.rkey AND i.param = ${clause.code})`
    return first.missing ? sql`NOT ${exists}` : exists
  }
  const alternatives = clause.values.map((value) => valueCondition(sql, clause, value))
  const subquery = sql`SELECT rkey FROM ${table} WHERE type = ${type} AND param = ${clause.code} AND ${sql.or(alternatives)}`
  return clause.exclude ? sql`r.rkey NOT IN (${subquery})` : sql`r.rkey IN (${subquery})`
}
