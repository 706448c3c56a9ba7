/**
 * A response body given as stored JSON text, in the negotiated format. JSON is the text as it is; XML of a
 * large resource or page (a Bundle of many megabytes, a ValueSet of thousands of codes) is written in slices
 * with the event loop given back between them (toXml.ts, `toXmlSliced`), so that it does not hold up other
 * requests. The bytes are the same as written at once.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { parseJson } from "../json/Json.ts"
import { contentTypeOf, type Negotiated } from "./Format.ts"
import { resourceBody } from "./respond.ts"
import { toXmlSliced } from "./xml/toXml.ts"

/** Below this size a body is written in one go: slicing would cost more than it gives back. */
const sliceAbove = 256 * 1024

export const largeBody = (
  text: string,
  negotiated: Negotiated,
  catalog: Catalog,
  options: { readonly status?: number; readonly headers?: Record<string, string> } = {}
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (negotiated.format !== "xml" || text.length < sliceAbove) return Effect.succeed(resourceBody(text, negotiated, catalog, options))
  return Effect.map(toXmlSliced(parseJson(text) as Record<string, unknown>, catalog, { pretty: negotiated.pretty }), (xml) =>
    HttpServerResponse.text(xml, {
      status: options.status ?? 200,
      contentType: contentTypeOf("xml"),
      ...(options.headers ? { headers: options.headers } : {})
    }))
}
