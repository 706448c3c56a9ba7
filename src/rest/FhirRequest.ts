/** A FHIR request as the interactions see it: the route's parts, the query, the negotiated format, the base. */
import type { HttpServerRequest } from "@effect/platform"
import type { Access } from "../auth/access/Access.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import type { Negotiated } from "./Format.ts"

export interface FhirRequest {
  readonly http: HttpServerRequest.HttpServerRequest
  readonly params: URLSearchParams
  readonly negotiated: Negotiated
  /** `[base]`, e.g. `http://127.0.0.1:8080/fhir`. */
  readonly base: string
  readonly catalog: Catalog
  readonly maxBodyBytes: number
  /** `server.max_page_bytes`: the most bytes of resources one page of a search, history or `$everything` holds. */
  readonly maxPageBytes: number
  readonly maxBundleEntries: number
  /** What the caller's token allows (src/auth/access/): every interaction checks it. */
  readonly access: Access
}

export const header = (request: FhirRequest, name: string): string | undefined => request.http.headers[name]
