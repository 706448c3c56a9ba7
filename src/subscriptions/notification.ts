/**
 * What a rest-hook notification carries (the interface leaves the body open; docs/subscriptions.md, "The
 * notification"): a FHIR Bundle of type `history` with one entry per version of the commit that matched, in
 * the commit's order, each as history shows it (fullUrl, the resource, request and response), so that a
 * receiver that knows FHIR reads it as it reads `_history`. A transaction Bundle that changed several matching
 * resources is one notification. A Subscription in the body leaves out its `channel.header` (interface spec,
 * Subscription notifications 6): its entries may hold the credentials of another receiver.
 */
import type { Operation } from "../db/ChangeFeed.ts"

/** One matched version, as the change feed carried it. */
export interface MatchedVersion {
  readonly type: string
  readonly id: string
  readonly version: number
  readonly op: Operation
  /** The version's JSON text as stored. */
  readonly resource: string
}

/** One notification of one Subscription: the versions of one commit its criteria matched. */
export interface Notification {
  readonly commitTs: number
  readonly versions: ReadonlyArray<MatchedVersion>
}

const methods: Readonly<Record<Operation, string>> = { create: "POST", update: "PUT", patch: "PATCH", delete: "DELETE" }

/** A Subscription's JSON without `channel.header`; any other resource as it is. */
export const withoutChannelHeaders = (type: string, resource: Record<string, unknown>): Record<string, unknown> => {
  if (type !== "Subscription") return resource
  const channel = resource["channel"]
  if (typeof channel !== "object" || channel === null || !("header" in channel)) return resource
  const { header: _header, ...rest } = channel as Record<string, unknown>
  return { ...resource, channel: rest }
}

/**
 * The body of `notification`, with resources' fullUrls under `base`; the Subscription and the commit go in
 * headers (`X-Svc-Subscription`, `X-Svc-Commit-Ts`, see Delivery.ts).
 */
export const notificationBody = (notification: Notification, base: string): string => {
  const entries = notification.versions.map((version) => {
    const resource = withoutChannelHeaders(version.type, JSON.parse(version.resource) as Record<string, unknown>)
    const meta = resource["meta"] as { readonly lastUpdated?: unknown } | undefined
    return {
      fullUrl: `${base}/${version.type}/${version.id}`,
      resource,
      request: { method: methods[version.op], url: version.op === "create" ? version.type : `${version.type}/${version.id}` },
      response: {
        status: version.op === "create" ? "201 Created" : "200 OK",
        etag: `W/"${version.version}"`,
        ...(typeof meta?.lastUpdated === "string" ? { lastModified: meta.lastUpdated } : {})
      }
    }
  })
  return JSON.stringify({ resourceType: "Bundle", type: "history", timestamp: new Date(Math.floor(notification.commitTs / 1000)).toISOString(), entry: entries })
}
