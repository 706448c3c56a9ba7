/**
 * A terminology source on loopback for the pull (docs/terminology-pull.md): a small FHIR server at `/fhir`
 * (`metadata`, and searches of CodeSystem, ValueSet and ConceptMap paged at most `pageSize` entries with absolute
 * `next` links), and files served as given. It records every request, may ask for HTTP Basic credentials under
 * `/private/`, and may be told to fail. Closed with the scope.
 */
import { Effect, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface SourceRequest {
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
}

export interface FileAnswer {
  /** Never answer: the request is held open until the source closes. */
  readonly hang?: boolean
  readonly status?: number
  readonly contentType?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body: string
}

export interface TerminologySource {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** `<url>/fhir` */
  readonly base: string
  /** The resources of the FHIR server, by type; change them to change what the next pull reads. */
  readonly resources: Map<string, Array<Record<string, unknown>>>
  /** Files by path (`/files/x.json`). */
  readonly files: Map<string, FileAnswer>
  /** Every request so far. */
  readonly requests: ReadonlyArray<SourceRequest>
  /** Every request answers 503 while set. */
  failing: boolean
  /** When set, a request under `/private/` without this Authorization header answers 401. */
  authorization: string | undefined
  /** Entries per search page at most, whatever `_count` asks. */
  pageSize: number
  /** Extra entries on the first page of each search (an OperationOutcome, say). */
  extraEntries: Array<Record<string, unknown>>
}

const capabilityStatement = {
  resourceType: "CapabilityStatement",
  status: "active",
  kind: "instance",
  fhirVersion: "4.0.1",
  format: ["json"],
  rest: [{
    mode: "server",
    resource: ["CodeSystem", "ValueSet", "ConceptMap", "Patient"].map((type) => ({ type, interaction: [{ code: "read" }, { code: "search-type" }] }))
  }]
}

export const startTerminologySource = (): Effect.Effect<TerminologySource, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<SourceRequest> = []
    const source: TerminologySource = {
      url: "",
      base: "",
      resources: new Map([["CodeSystem", []], ["ValueSet", []], ["ConceptMap", []]]),
      files: new Map(),
      requests,
      failing: false,
      authorization: undefined,
      pageSize: 2,
      extraEntries: []
    }
    const json = (response: ServerResponse, status: number, body: unknown, contentType = "application/fhir+json") => {
      response.writeHead(status, { "content-type": `${contentType}; charset=utf-8` })
      response.end(typeof body === "string" ? body : JSON.stringify(body))
    }
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const url = new URL(request.url ?? "/", source.url)
      requests.push({ path: `${url.pathname}${url.search}`, headers: { ...request.headers } as Record<string, string | undefined> })
      if (source.failing) return json(response, 503, { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "transient" }] })
      if (url.pathname.startsWith("/private/") && source.authorization !== undefined && request.headers.authorization !== source.authorization) {
        response.writeHead(401, { "www-authenticate": "Basic realm=\"terminology\"" })
        return response.end()
      }
      const file = source.files.get(url.pathname)
      if (file?.hang === true) return
      if (file !== undefined) {
        response.writeHead(file.status ?? 200, { ...(file.contentType === undefined ? {} : { "content-type": file.contentType }), ...file.headers })
        return response.end(file.body)
      }
      if (url.pathname === "/fhir/metadata") return json(response, 200, capabilityStatement)
      const type = /^\/fhir\/([A-Za-z]+)$/.exec(url.pathname)?.[1]
      const all = type === undefined ? undefined : source.resources.get(type)
      if (type === undefined || all === undefined) return json(response, 404, { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "not-found" }] })
      const count = Math.min(Number(url.searchParams.get("_count") ?? "10"), source.pageSize)
      const page = Number(url.searchParams.get("page") ?? "1")
      const slice = all.slice((page - 1) * count, page * count)
      const link = [{ relation: "self", url: url.href }]
      if (page * count < all.length) link.push({ relation: "next", url: `${source.base}/${type}?_count=${count}&page=${page + 1}` })
      const entries = slice.map((resource) => ({ fullUrl: `${source.base}/${type}/${String(resource["id"])}`, resource, search: { mode: "match" } }))
      const extra = page === 1 ? source.extraEntries.map((resource) => ({ resource, search: { mode: "outcome" } })) : []
      return json(response, 200, { resourceType: "Bundle", type: "searchset", total: all.length, link, entry: [...entries, ...extra] })
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
      () => Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    )
    const port = (server.address() as AddressInfo).port
    const url = `http://127.0.0.1:${port}`
    return Object.assign(source, { url, base: `${url}/fhir` })
  })

/** A port on loopback that nothing listens on (taken, then let go). */
export { closedPort } from "./receiver.ts"
