/**
 * A response Bundle's body. JSON is the text as assembled; XML of a large Bundle is rendered entry by entry,
 * giving the event loop back between slices, so that a page of many megabytes does not hold up other requests.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { contentTypeOf, type Negotiated } from "./Format.ts"
import { resourceBody } from "./respond.ts"
import { renderXml } from "./xmlBridge.ts"

/** Below this size a Bundle is rendered in one go: slicing costs more than it gives back. */
const sliceAbove = 256 * 1024
/** Work done between two yields. */
const sliceMillis = 20

/** Resumes on the next turn of the event loop (after pending I/O), unlike a microtask. */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

const xmlPrologue = /^<\?xml[^>]*\?>\n?<Bundle xmlns="http:\/\/hl7\.org\/fhir">/
const closing = /\n?<\/Bundle>$/

/** The XML of `bundle`, rendered one entry at a time with yields between slices. */
const slicedXml = (bundle: Record<string, unknown>, catalog: Catalog, pretty: boolean): Effect.Effect<string> =>
  Effect.gen(function*() {
    const entries = bundle["entry"] as ReadonlyArray<unknown>
    const { entry: _entries, ...envelope } = bundle
    const head = renderXml(envelope, catalog, pretty)
    const close = closing.exec(head)
    if (close === null) return renderXml(bundle, catalog, pretty)
    const parts: Array<string> = [head.slice(0, close.index)]
    // Entries go in batches, as many as fit the slice's time, so the per-render overhead stays small.
    let batch = 8
    for (let at = 0; at < entries.length;) {
      const started = performance.now()
      const some = renderXml({ resourceType: "Bundle", entry: entries.slice(at, at + batch) }, catalog, pretty)
      at += batch
      parts.push(some.replace(xmlPrologue, "").replace(closing, ""))
      const took = performance.now() - started
      if (took < sliceMillis / 2) batch *= 2
      else if (took > sliceMillis && batch > 1) batch = Math.ceil(batch / 2)
      yield* yieldToEventLoop
    }
    parts.push(close[0])
    return parts.join("")
  })

/**
 * The response for a Bundle given as JSON text, in the negotiated format. A large Bundle in XML is rendered in
 * slices; a Bundle with a signature (which follows the entries) is rendered whole.
 */
export const bundleBody = (
  text: string,
  negotiated: Negotiated,
  catalog: Catalog,
  options: { readonly headers?: Record<string, string> } = {}
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (negotiated.format !== "xml" || text.length < sliceAbove) return Effect.succeed(resourceBody(text, negotiated, catalog, options))
  const bundle = JSON.parse(text) as Record<string, unknown>
  if (!Array.isArray(bundle["entry"]) || bundle["signature"] !== undefined) return Effect.succeed(resourceBody(bundle, negotiated, catalog, options))
  return Effect.map(slicedXml(bundle, catalog, negotiated.pretty), (xml) =>
    HttpServerResponse.text(xml, { contentType: contentTypeOf("xml"), ...(options.headers ? { headers: options.headers } : {}) }))
}
