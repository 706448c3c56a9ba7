/**
 * The AuditEvents of the trail, in the shape of the IHE Basic Audit Log Patterns (BALP) profiles for RESTful
 * activity: `type` rest, `subtype` the FHIR interaction (create, update, patch, delete, read, vread,
 * search-type, search-system, history-*, operation, ...), `action` C/R/U/D/E, `recorded`, `outcome` 0
 * (success), 4 (the request was refused or failed on the client's side) or 8 (the server failed), one agent (the
 * requestor: `who` is the caller key, `network` its address), `source` the server, and entities: what was
 * touched (`Type/id/_history/version` for a change), the search's query (base64, with `audit.include_query`),
 * and the request's X-Request-Id.
 *
 * A change is one AuditEvent per changed resource (a transaction Bundle of ten entries is ten rows, committed
 * together), so that `/_audit?entity=Type/id` finds every change of a resource. The authorization server's
 * decisions are AuditEvents of other types, made in SecurityEvents.ts and kept by `packEvent` like any other.
 */
import type { Change, WriteOrigin } from "../../db/ChangeFeed.ts"
import type { Completion } from "../../http/FrontDoor.ts"
import { callerKey } from "../../http/Principal.ts"
import type { Route } from "../../http/Route.ts"

export interface Coding {
  readonly system?: string
  readonly code: string
  readonly display?: string
}

export interface AuditEntity {
  readonly what?: { readonly reference?: string; readonly identifier?: { readonly system?: string; readonly value: string } }
  readonly type?: Coding
  readonly role?: Coding
  readonly query?: string
  readonly description?: string
  /** Facts about the entity as name and text (the authorization server's scopes, grant type...). */
  readonly detail?: ReadonlyArray<{ readonly type: string; readonly valueString: string }>
}

/** An AuditEvent as stored (no `id`: the row's seq is its id when served). */
export interface AuditEvent {
  readonly resourceType: "AuditEvent"
  readonly type: Coding
  readonly subtype?: ReadonlyArray<Coding>
  readonly action: "C" | "R" | "U" | "D" | "E"
  readonly recorded: string
  readonly outcome: "0" | "4" | "8" | "12"
  readonly outcomeDesc?: string
  readonly agent: ReadonlyArray<{
    readonly type?: { readonly coding: ReadonlyArray<Coding> }
    readonly who: { readonly reference?: string; readonly identifier: { readonly value: string }; readonly display?: string }
    readonly requestor: boolean
    readonly network?: { readonly address: string; readonly type: "1" | "2" }
  }>
  readonly source: { readonly observer: { readonly display: string }; readonly type: ReadonlyArray<Coding> }
  readonly entity?: ReadonlyArray<AuditEntity>
}

/** What the table keeps beside the JSON, for `/_audit`'s filters: read from the event, never given apart. */
export interface Columns {
  /** `recorded` in milliseconds since the epoch. */
  readonly time: number
  /** The subtype's code, or `admin` (a governance endpoint), `export` (an export job endpoint), `graphql`, or `sampled` (a summary row). */
  readonly kind: string
  readonly action: string
  readonly outcome: string
  /** The requestor's caller key. */
  readonly agent: string
  readonly client: string | null
  /** The resource the event is about, `Type/id`, when it is about one. */
  readonly entity: string | null
}

export const restType: Coding = { system: "http://terminology.hl7.org/CodeSystem/audit-event-type", code: "rest", display: "RESTful Operation" }
const interactionSystem = "http://hl7.org/fhir/restful-interaction"
export const svcSystem = "urn:svc:audit"
const entityTypeSystem = "http://terminology.hl7.org/CodeSystem/audit-entity-type"
export const requestIdType: Coding = { system: "https://profiles.ihe.net/ITI/BALP/CodeSystem/BasicAuditEntityType", code: "XrequestId" }
const sourceRole: Coding = { system: "http://dicom.nema.org/resources/ontology/DCM", code: "110153", display: "Source Role ID" }
export const source: AuditEvent["source"] = {
  observer: { display: "svc" },
  type: [{ system: "http://terminology.hl7.org/CodeSystem/security-source-type", code: "4", display: "Application Server" }]
}
export const agentType = { coding: [sourceRole] }
export const systemObject: Coding = { system: entityTypeSystem, code: "2", display: "System Object" }
const queryRole: Coding = { system: "http://terminology.hl7.org/CodeSystem/object-role", code: "24", display: "Query" }

/**
 * The text a row keeps of an event: its JSON without the parts every event of this server shares (the `rest`
 * type, the source, the agent's role, the entity types and roles, the restful-interaction system), which
 * `unpackEvent` puts back. A read's event is some 300 bytes instead of 1 KB, and the row, its hash and its
 * JSON cost that much less for each audited request. Parts are left out only when they are these very objects,
 * so an event made otherwise is kept whole.
 */
export const packEvent = (event: AuditEvent): string => {
  const subtype = event.subtype
  const plainSubtype = subtype !== undefined && subtype.length === 1 && subtype[0]!.system === interactionSystem && subtype[0]!.display === undefined
  return JSON.stringify({
    ...(event.type === restType ? {} : { type: event.type }),
    ...(subtype === undefined ? {} : { subtype: plainSubtype ? subtype[0]!.code : subtype }),
    action: event.action,
    recorded: event.recorded,
    outcome: event.outcome,
    ...(event.outcomeDesc === undefined ? {} : { outcomeDesc: event.outcomeDesc }),
    agent: event.agent.map((agent) => (agent.type === agentType ? { ...agent, type: undefined } : agent)),
    ...(event.source === source ? {} : { source: event.source }),
    ...(event.entity === undefined ? {} : {
      entity: event.entity.map((entity) => ({
        ...entity,
        ...(entity.type === systemObject ? { type: "object" } : entity.type === requestIdType ? { type: "request-id" } : {}),
        ...(entity.role === queryRole ? { role: "query" } : {})
      }))
    })
  })
}

/** The event a row's text stands for (`packEvent`), in the order of the AuditEvent's elements. */
export const unpackEvent = (text: string): AuditEvent => {
  const parsed = JSON.parse(text) as unknown
  if (Array.isArray(parsed)) return unpackCompact(parsed as unknown as Compact)
  const packed = parsed as Record<string, any>
  if (packed["resourceType"] === "AuditEvent") return packed as AuditEvent
  const entity = packed["entity"] as ReadonlyArray<Record<string, any>> | undefined
  return {
    resourceType: "AuditEvent",
    type: packed["type"] ?? restType,
    ...(packed["subtype"] === undefined ? {} : {
      subtype: typeof packed["subtype"] === "string" ? [{ system: interactionSystem, code: packed["subtype"] }] : packed["subtype"]
    }),
    action: packed["action"],
    recorded: packed["recorded"],
    outcome: packed["outcome"],
    ...(packed["outcomeDesc"] === undefined ? {} : { outcomeDesc: packed["outcomeDesc"] }),
    agent: (packed["agent"] as ReadonlyArray<Record<string, any>>).map(({ type, ...agent }) => ({ type: type ?? agentType, ...agent })) as unknown as AuditEvent["agent"],
    source: packed["source"] ?? source,
    ...(entity === undefined ? {} : {
      entity: entity.map(({ what, type, role, ...rest }) => ({
        ...(what === undefined ? {} : { what }),
        ...(type === undefined ? {} : { type: type === "object" ? systemObject : type === "request-id" ? requestIdType : type }),
        ...(role === undefined ? {} : { role: role === "query" ? queryRole : role }),
        ...rest
      }))
    })
  }
}

/** An event as its row keeps it: the packed text (`packEvent`) and the filter columns (`columnsOf`). */
export interface Packed {
  readonly text: string
  readonly columns: Columns
}

export const pack = (event: AuditEvent): Packed => ({ text: packEvent(event), columns: columnsOf(event) })

export const columnsOf = (event: AuditEvent): Columns => {
  const subtype = event.subtype?.[0]
  const what = event.entity?.find((entity) => entity.what?.reference !== undefined)?.what?.reference
  const agent = event.agent[0]
  return {
    time: Date.parse(event.recorded),
    kind: subtype === undefined ? "event" : subtype.code,
    action: event.action,
    outcome: event.outcome,
    agent: agent?.who.identifier.value ?? "",
    client: agent?.network?.address ?? null,
    entity: what === undefined ? null : what.split("/").slice(0, 2).join("/")
  }
}

const outcomeOf = (status: number): AuditEvent["outcome"] => (status < 400 ? "0" : status < 500 ? "4" : "8")

/** The agent's network type: 2 for an IP address, 1 for a machine name. */
export const networkType = (address: string): "1" | "2" => (address.includes(":") || /^[\d.]+$/.test(address) ? "2" : "1")

const agentOf = (key: string, address: string | null): AuditEvent["agent"] => [{
  type: agentType,
  who: { identifier: { value: key } },
  requestor: true,
  ...(address === null ? {} : { network: { address, type: networkType(address) } })
}]

const requestEntity = (requestId: string | null): ReadonlyArray<AuditEntity> =>
  requestId === null ? [] : [{ what: { identifier: { value: requestId } }, type: requestIdType }]

const actions: Record<Change["op"], AuditEvent["action"]> = { create: "C", update: "U", patch: "U", delete: "D" }

/** The AuditEvent of one committed change. */
export const changeEvent = (commitTs: number, origin: WriteOrigin, change: Change): AuditEvent => ({
  resourceType: "AuditEvent",
  type: restType,
  subtype: [{ system: interactionSystem, code: change.op }],
  action: actions[change.op],
  recorded: new Date(Math.floor(commitTs / 1000)).toISOString(),
  outcome: "0",
  agent: agentOf(origin.actor, origin.client ?? null),
  source,
  entity: [
    { what: { reference: `${change.type}/${change.id}/_history/${change.version}` }, type: systemObject },
    ...requestEntity(origin.requestId)
  ]
})

/** The governance endpoints whose reading is itself audited (admin access). */
export const adminPaths: ReadonlySet<string> = new Set(["/_audit", "/_audit/verify", "/_usage", "/_requests"])

/** The subtype of a route's interaction (restful-interaction codes). */
const subtypeOf = (route: Route, method: string): string => {
  switch (route.interaction) {
    case "search":
      return route.level === "system" ? "search-system" : "search-type"
    case "history":
      return `history-${route.level}`
    case "batch-or-transaction":
      return "batch"
    case "unknown":
      return method.toLowerCase()
    case "root-endpoint":
      return "operation"
    default:
      return route.interaction
  }
}

const actionOf = (route: Route, method: string): AuditEvent["action"] => {
  switch (route.interaction) {
    case "create":
      return "C"
    case "update":
    case "patch":
      return "U"
    case "delete":
      return "D"
    case "read":
    case "vread":
    case "search":
    case "history":
    case "capabilities":
      return "R"
    default:
      return method === "GET" || method === "HEAD" ? "R" : "E"
  }
}

/** A completed request as the trail keeps it until it is appended: no JSON is made on the request's path. */
export interface Pending {
  readonly completion: Completion
  readonly timeMillis: number
  readonly admin: boolean
}

/** The AuditEvent of a read, search, refusal or admin access. */
export const requestEvent = (pending: Pending, includeQuery: boolean): AuditEvent => {
  const { completion, timeMillis, admin } = pending
  const route = completion.route
  const query = completion.url.indexOf("?")
  const entities: Array<AuditEntity> = []
  if (admin) {
    entities.push({ what: { identifier: { system: svcSystem, value: completion.path } }, type: systemObject })
  } else if (route.type !== undefined && route.id !== undefined) {
    const version = route.version === undefined ? "" : `/_history/${route.version}`
    entities.push({ what: { reference: `${route.type}/${route.id}${version}` }, type: systemObject })
  }
  if (includeQuery && query !== -1 && (route.interaction === "search" || admin)) {
    entities.push({
      type: systemObject,
      role: queryRole,
      ...(route.type === undefined ? {} : { description: route.type }),
      query: Buffer.from(completion.url.slice(query + 1), "utf8").toString("base64")
    })
  }
  entities.push(...requestEntity(completion.requestId))
  const outcome = outcomeOf(completion.status)
  return {
    resourceType: "AuditEvent",
    type: restType,
    subtype: [
      admin
        ? completion.path.startsWith("/export/")
          ? { system: svcSystem, code: "export", display: `${completion.method} ${completion.path}` }
          : completion.path === "/graphql"
          ? { system: svcSystem, code: "graphql", display: `${completion.method} ${completion.path}` }
          : { system: svcSystem, code: "admin", display: `GET ${completion.path}` }
        : { system: interactionSystem, code: subtypeOf(route, completion.method) }
    ],
    action: actionOf(route, completion.method),
    recorded: new Date(timeMillis).toISOString(),
    outcome,
    ...(outcome === "0" ? {} : { outcomeDesc: `${completion.method} ${completion.path}: HTTP ${completion.status}` }),
    agent: agentOf(callerKey(completion.principal), completion.client),
    source,
    ...(entities.length === 0 ? {} : { entity: entities })
  }
}

/** An event of the trail itself rather than of one request: a count of what was not recorded one by one. */
const summaryEvent = (code: string, outcome: AuditEvent["outcome"], timeMillis: number, outcomeDesc: string, agent: string): AuditEvent => ({
  resourceType: "AuditEvent",
  type: restType,
  subtype: [{ system: svcSystem, code }],
  action: "E",
  recorded: new Date(timeMillis).toISOString(),
  outcome,
  outcomeDesc,
  agent: agentOf(agent, null),
  source
})

/** The row that stands for `count` refusals with no known caller in the second from `secondMillis`. */
export const sampledEvent = (secondMillis: number, count: number): AuditEvent =>
  summaryEvent("sampled", "4", secondMillis, `sampled: ${count} more refusals with no known caller in this second, not recorded one by one (audit.unattributed_per_second)`, "unattributed")

/** The row that says events were lost because the buffer was full while the database could not take them. */
export const lostEvent = (timeMillis: number, count: number): AuditEvent =>
  summaryEvent("lost", "8", timeMillis, `${count} audit events were not recorded: the database could not take them and the buffer was full`, "system")

/*
 * The events a busy server records most, a read or search and a change, are kept in a shorter form still: a JSON
 * array of the parts that differ from one event to the next (`Compact`), written straight from the request or
 * the change without building the AuditEvent, which `unpackEvent` turns into the very event `requestEvent` or
 * `changeEvent` makes (test/governance/audit.events.test.ts holds them to it). A read's row is then some 150 bytes,
 * and neither objects nor spreads are made for it: at thousands of audited reads a second, the row's bytes and
 * the work of making them are most of what the trail costs.
 */

/**
 * `[1, subtype code, action, recorded, outcome, outcomeDesc, agent key, agent address, entity reference,
 * query description, query (base64), request id]`, null where absent; the leading 1 names the form.
 */
type Compact = readonly [1, string, AuditEvent["action"], string, AuditEvent["outcome"], string | null, string, string | null, string | null, string | null, string | null, string | null]

const compactText = (compact: Compact): string => JSON.stringify(compact)

const unpackCompact = ([, code, action, recorded, outcome, outcomeDesc, key, address, reference, description, query, requestId]: Compact): AuditEvent => {
  const entities: Array<AuditEntity> = []
  if (reference !== null) entities.push({ what: { reference }, type: systemObject })
  if (query !== null) entities.push({ type: systemObject, role: queryRole, ...(description === null ? {} : { description }), query })
  if (requestId !== null) entities.push({ what: { identifier: { value: requestId } }, type: requestIdType })
  return {
    resourceType: "AuditEvent",
    type: restType,
    subtype: [{ system: interactionSystem, code }],
    action,
    recorded,
    outcome,
    ...(outcomeDesc === null ? {} : { outcomeDesc }),
    agent: agentOf(key, address),
    source,
    ...(entities.length === 0 ? {} : { entity: entities })
  }
}

/** `Type/id` of a reference, as `columnsOf` reads it. */
const entityOf = (reference: string): string => reference.split("/").slice(0, 2).join("/")

/** The row of a read, search or refusal (`requestEvent`, packed); an admin access takes the general path. */
export const packRequest = (pending: Pending, includeQuery: boolean): Packed => {
  if (pending.admin) return pack(requestEvent(pending, includeQuery))
  const { completion, timeMillis } = pending
  const route = completion.route
  const recorded = new Date(timeMillis).toISOString()
  const outcome = outcomeOf(completion.status)
  const key = callerKey(completion.principal)
  const reference = route.type !== undefined && route.id !== undefined
    ? `${route.type}/${route.id}${route.version === undefined ? "" : `/_history/${route.version}`}`
    : null
  const queryAt = completion.url.indexOf("?")
  const query = includeQuery && queryAt !== -1 && route.interaction === "search"
    ? Buffer.from(completion.url.slice(queryAt + 1), "utf8").toString("base64")
    : null
  const code = subtypeOf(route, completion.method)
  const action = actionOf(route, completion.method)
  const text = compactText([
    1,
    code,
    action,
    recorded,
    outcome,
    outcome === "0" ? null : `${completion.method} ${completion.path}: HTTP ${completion.status}`,
    key,
    completion.client,
    reference,
    query === null ? null : route.type ?? null,
    query,
    completion.requestId
  ])
  return {
    text,
    columns: { time: Math.trunc(timeMillis), kind: code, action, outcome, agent: key, client: completion.client, entity: reference === null ? null : entityOf(reference) }
  }
}

/** The row of one committed change (`changeEvent`, packed). */
export const packChange = (commitTs: number, origin: WriteOrigin, change: Change): Packed => {
  const time = Math.floor(commitTs / 1000)
  const reference = `${change.type}/${change.id}/_history/${change.version}`
  const client = origin.client ?? null
  const action = actions[change.op]
  const text = compactText([1, change.op, action, new Date(time).toISOString(), "0", null, origin.actor, client, reference, null, null, origin.requestId])
  return { text, columns: { time, kind: change.op, action, outcome: "0", agent: origin.actor, client, entity: entityOf(reference) } }
}
