/**
 * `GET /_audit` and `GET /_audit/verify` (spec: Endpoints, "Governance endpoints"). Both answer the access
 * check first (access.ts); reading them is itself recorded (admin access, AuditTrail.ts).
 *
 * `/_audit` is a FHIR searchset Bundle of AuditEvents, newest first, filtered by `date` (with `ge`, `gt`, `le`,
 * `lt` or `eq` prefixes, repeated for a range), `agent` (a caller key or a client address), `entity` (`Type/id`),
 * `type` (`rest`: the RESTful events; a type code of the authorization server's events, such as `110114`; or a
 * subtype code: `read`, `create`, `search-type`, `admin`, `sampled`, `ITI-71`...), `action`
 * (C, R, U, D, E), `outcome` (0, 4, 8, 12) and `_count` (1 to 1000, default 100); pages are cut by seq and the
 * `next` link carries `_cursor`. A parameter that cannot be read, or is not one of these, is a 400 naming it.
 * What was queued for the trail before the request is appended first (at most two seconds' wait), so a caller
 * reads what it did.
 */
import { HttpServerResponse } from "@effect/platform"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { Database } from "../../db/Database.ts"
import { controlCharacter } from "../../db/text.ts"
import { outcomeResponse } from "../../http/OperationOutcome.ts"
import type { RootHandler } from "../../http/RootRoutes.ts"
import { unpackEvent } from "./events.ts"
import { kindsOfType, securityKinds } from "./SecurityEvents.ts"
import { governanceRefusal } from "../access.ts"
import { type ChainKey, verify } from "./chain.ts"

const fhirJson = "application/fhir+json; charset=utf-8"

const defaultCount = 100
const maxCount = 1000

/** A parameter that cannot be read: the 400 names it. */
class BadParameter {
  constructor(readonly name: string, readonly value: string, readonly expected: string) {}
}

/** The first and one-past-the-last millisecond of a date or dateTime at its precision. */
export const dateRange = (text: string): readonly [number, number] | undefined => {
  const date = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$/.exec(text)
  if (date !== null) {
    const year = Number(date[1])
    const month = date[2] === undefined ? undefined : Number(date[2])
    const day = date[3] === undefined ? undefined : Number(date[3])
    if (month !== undefined && (month < 1 || month > 12)) return undefined
    if (day !== undefined && (day < 1 || day > new Date(Date.UTC(year, month!, 0)).getUTCDate())) return undefined
    const start = Date.UTC(year, (month ?? 1) - 1, day ?? 1)
    const end = day !== undefined ? Date.UTC(year, month! - 1, day + 1) : month !== undefined ? Date.UTC(year, month, 1) : Date.UTC(year + 1, 0, 1)
    return [start, end]
  }
  const time = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.exec(text)
  if (time === null) return undefined
  const start = Date.parse(text)
  if (Number.isNaN(start)) return undefined
  const step = time[2] !== undefined ? 1 : time[1] !== undefined ? 1000 : 60_000
  return [start, start + step]
}

interface Filters {
  readonly conditions: ReadonlyArray<Fragment>
  readonly count: number
  readonly cursor: number | undefined
}

const readFilters = (sql: SqlClient, params: URLSearchParams): Filters => {
  const conditions: Array<Fragment> = []
  let count = defaultCount
  let cursor: number | undefined
  for (const [name, value] of params) {
    switch (name) {
      case "date": {
        const match = /^(eq|ge|gt|le|lt)?(.*)$/.exec(value)!
        const range = dateRange(match[2]!)
        if (range === undefined) throw new BadParameter(name, value, "a date or dateTime with an optional ge, gt, le, lt or eq prefix")
        const [start, end] = range
        switch (match[1]) {
          case "ge":
            conditions.push(sql`time >= ${start}`)
            break
          case "gt":
            conditions.push(sql`time >= ${end}`)
            break
          case "le":
            conditions.push(sql`time < ${end}`)
            break
          case "lt":
            conditions.push(sql`time < ${start}`)
            break
          default:
            conditions.push(sql`time >= ${start}`, sql`time < ${end}`)
        }
        break
      }
      case "agent":
        if (value === "" || controlCharacter.test(value)) throw new BadParameter(name, value, "a caller key (client:<id>, address:<address>) or a client address")
        conditions.push(sql`(agent = ${value} OR client = ${value})`)
        break
      case "entity":
        if (!/^[A-Za-z]+\/[A-Za-z0-9\-.]{1,64}$/.test(value)) throw new BadParameter(name, value, "Type/id")
        conditions.push(sql`entity = ${value}`)
        break
      case "type": {
        const code = value.includes("|") ? value.slice(value.indexOf("|") + 1) : value
        if (!/^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/.test(code)) {
          throw new BadParameter(name, value, "rest, a type code such as 110114, or a subtype code such as read, create, search-type or ITI-71")
        }
        const kinds = kindsOfType[code]
        if (code === "rest") conditions.push(sql.and(securityKinds.map((kind) => sql`kind <> ${kind}`)))
        else if (kinds !== undefined) conditions.push(sql.or(kinds.map((kind) => sql`kind = ${kind}`)))
        else conditions.push(sql`kind = ${code}`)
        break
      }
      case "action":
        if (!/^[CRUDE]$/.test(value)) throw new BadParameter(name, value, "one of C, R, U, D, E")
        conditions.push(sql`action = ${value}`)
        break
      case "outcome":
        if (!/^(0|4|8|12)$/.test(value)) throw new BadParameter(name, value, "one of 0, 4, 8, 12")
        conditions.push(sql`outcome = ${value}`)
        break
      case "_count":
        if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > maxCount) throw new BadParameter(name, value, `a whole number from 1 to ${maxCount}`)
        count = Number(value)
        break
      case "_cursor":
        if (!/^\d{1,15}$/.test(value)) throw new BadParameter(name, value, "the cursor of a next link")
        cursor = Number(value)
        break
      case "_format":
        break
      default:
        throw new BadParameter(name, value, "one of date, agent, entity, type, action, outcome, _count")
    }
  }
  if (cursor !== undefined) conditions.push(sql`seq < ${cursor}`)
  return { conditions, count, cursor }
}

interface Row {
  readonly seq: number | string
  readonly event: string
}

export interface AuditRoutesInput {
  readonly flush: Effect.Effect<void>
  readonly smart: boolean
  /** `server.public_url`, the base of the Bundle's links; without it the request's Host. */
  readonly publicUrl?: string | undefined
  readonly key: ChainKey
  readonly db: Database["Type"]
}

/** The event served with the row's seq as its id, right after `resourceType`. */
const withId = ({ resourceType, ...rest }: ReturnType<typeof unpackEvent>, id: string) => ({ resourceType, id, ...rest })

export const auditRoutes = (input: AuditRoutesInput): Record<string, RootHandler> => {
  const db = input.db
  const search: RootHandler = ({ http, path, principal }) => {
    const refusal = governanceRefusal(principal, input.smart)
    if (refusal !== undefined) return Effect.succeed(refusal)
    const url = new URL(http.url, "http://localhost")
    try {
      readFilters(db.writer, url.searchParams)
    } catch (error) {
      if (!(error instanceof BadParameter)) throw error
      return Effect.succeed(outcomeResponse("invalid", `parameter ${error.name}: cannot read '${error.value}': expected ${error.expected}`, { status: 400 }))
    }
    return Effect.gen(function*() {
      yield* input.flush
      // Read again with the reader's client (checked above: it does not throw now).
      const { count, rows } = yield* db.withReader((sql) => {
        const filters = readFilters(sql, url.searchParams)
        const where = filters.conditions.length === 0 ? sql`1 = 1` : sql.and(filters.conditions)
        return Effect.map(
          sql<Row>`SELECT seq, event FROM svc_audit WHERE ${where} ORDER BY seq DESC LIMIT ${filters.count + 1}`,
          (rows) => ({ count: filters.count, rows })
        )
      })
      const page = rows.slice(0, count)
      const base = input.publicUrl !== undefined ? input.publicUrl.replace(/\/+$/, "") : `http://${http.headers["host"] ?? "localhost"}`
      const self = `${base}${path}${url.search}`
      const links: Array<{ relation: string; url: string }> = [{ relation: "self", url: self }]
      if (rows.length > count) {
        const next = new URLSearchParams(url.searchParams)
        next.set("_cursor", String(page[page.length - 1]!.seq))
        links.push({ relation: "next", url: `${base}${path}?${next.toString()}` })
      }
      const bundle = {
        resourceType: "Bundle",
        type: "searchset",
        link: links,
        entry: page.map((row) => ({
          fullUrl: `urn:svc:audit:${row.seq}`,
          resource: withId(unpackEvent(row.event), String(row.seq)),
          search: { mode: "match" }
        }))
      }
      return HttpServerResponse.text(JSON.stringify(bundle), { contentType: fhirJson })
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.logError("reading the audit trail failed", cause), outcomeResponse("exception", "the audit trail could not be read; see the server log", { status: 500 }))
      )
    )
  }
  const verifyHandler: RootHandler = ({ principal }) => {
    const refusal = governanceRefusal(principal, input.smart)
    if (refusal !== undefined) return Effect.succeed(refusal)
    return db.withReader((sql) => verify(sql, input.key)).pipe(
      Effect.map((result) => HttpServerResponse.text(JSON.stringify(result), { contentType: "application/json" })),
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.logError("verifying the audit trail failed", cause), outcomeResponse("exception", "the audit trail could not be read; see the server log", { status: 500 }))
      )
    )
  }
  return { "/_audit": search, "/_audit/verify": verifyHandler }
}
