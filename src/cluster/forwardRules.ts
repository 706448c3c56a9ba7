/**
 * Which requests a replica sends to the primary (docs/cluster.md, "Forwarding"): those that write, and those
 * only the primary can answer. `forward.ts` carries them there.
 */

/** The FHIR API's base path (`http/Route.ts` reads it the same way). */
const fhirBase = "/fhir"

const isRead = (method: string): boolean => method === "GET" || method === "HEAD"

/** Whether `path` is `base` or lies under it (`/fhir`, `/fhir/...`; not `/fhirX`). */
const isUnder = (path: string, base: string): boolean =>
  path.startsWith(base) && (path.length === base.length || path.charCodeAt(base.length) === 47 /* / */)

/** The last non-empty segment of a path, percent-decoded; undefined when there is none or it is not valid UTF-8. */
const lastSegment = (path: string): string | undefined => {
  const segments = path.split("/").filter((segment) => segment !== "")
  const last = segments[segments.length - 1]
  if (last === undefined) return undefined
  try {
    return decodeURIComponent(last)
  } catch {
    return undefined
  }
}

/** Operations only the primary answers, GET included: `$export` (its jobs run there) and `$install` (so do its jobs). */
const primaryOperations: ReadonlySet<string> = new Set(["$export", "$install"])

/**
 * Whether a replica sends this request to the primary. `url` is the request target as Node gives it
 * (path and query); the path is read without the query, as the server's own router reads it
 * (`http/Route.ts`): `/fhir` followed by `/` or nothing, segments split on `/` and then percent-decoded,
 * so `%24export` is `$export` and `/fhirX` is not the FHIR API.
 *
 * Forwarded:
 * - every FHIR API request that is not a GET or HEAD (a write, a batch or transaction, a POSTed search or
 *   operation: the replica cannot tell from the path which of them write);
 * - a GET or HEAD of `$export` at any level (the export job runs on the primary), of `$install` (its jobs
 *   and their status are the primary's, and so is the list of installed packages it answers), and of
 *   `$document` with `persist=true` (it stores the document);
 * - everything under `/auth/` (the authorization server writes its grants and tokens) and `/export/`
 *   (the jobs and their files live on the primary);
 * - `/graphql` unless GET or HEAD (a POSTed document may hold a mutation);
 * - `/ws`, the Subscriptions WebSocket (its notifications are sent by the primary). A plain GET of it,
 *   not an upgrade, goes too, and is answered as the primary answers it.
 *
 * Everything else is the replica's own: FHIR reads and searches, the probes, `/sync` (live queries run on
 * the replica), `/_usage`, `/_audit`, `/_requests`, discovery documents and `/fhir/metadata`, and any path
 * no route answers (a request target not in origin form, such as `*`, included): the replica answers
 * those with its own 404 or 405.
 */
/** Whether the query of a `$document` asks for the document to be stored (`persist=true`: a create of a Bundle). */
const storesDocument = (query: string): boolean => {
  const hash = query.indexOf("#")
  return new URLSearchParams(hash === -1 ? query : query.slice(0, hash)).getAll("persist").includes("true")
}

export const mustForward = (method: string, url: string): boolean => {
  if (!url.startsWith("/")) return false
  const end = url.search(/[?#]/)
  const path = end === -1 ? url : url.slice(0, end)
  if (isUnder(path, fhirBase)) {
    if (!isRead(method)) return true
    const last = lastSegment(path.slice(fhirBase.length))
    return primaryOperations.has(last ?? "") || (last === "$document" && end !== -1 && url[end] === "?" && storesDocument(url.slice(end + 1)))
  }
  if (path.startsWith("/auth/") || path.startsWith("/export/")) return true
  if (path === "/graphql") return !isRead(method)
  return path === "/ws"
}
