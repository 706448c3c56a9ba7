/** Reading a FHIR request body: size limit (413), UTF-8, JSON or XML of a resource (400 with the reason). */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { checkBody } from "./bodyCheck.ts"
import { parseJson as parseKeepingDecimals } from "../json/Json.ts"
import { duplicateKeys, duplicateKeyText } from "../validation/jsonKeys.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import { bodyFormat } from "./Format.ts"
import { parseXml } from "./xmlBridge.ts"

const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * The body's bytes, gathered once (the platform's reader copies the whole buffer for every chunk,
 * which is quadratic on bodies of tens of MB); 413 as soon as `maxBytes` is passed.
 */
const bodyBytes = (request: HttpServerRequest.HttpServerRequest, maxBytes: number): Effect.Effect<Buffer, FhirError> =>
  Effect.async<Buffer, FhirError>((resume) => {
    const source = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > maxBytes) {
        cleanup()
        source.resume()
        resume(Effect.fail(fail("too-costly", `the request body is larger than the limit of ${maxBytes} bytes`, 413)))
      } else {
        chunks.push(chunk)
      }
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks, size)))
    }
    const onError = () => {
      cleanup()
      resume(Effect.fail(fail("structure", "the request body could not be read")))
    }
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(cleanup)
  })

/** The body's bytes, as they came (an archive); 413 beyond `maxBytes`. */
export const bodyBuffer = (request: HttpServerRequest.HttpServerRequest, maxBytes: number): Effect.Effect<Buffer, FhirError> => {
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > maxBytes) return Effect.fail(fail("too-costly", `the request body has ${declared} bytes; the limit is ${maxBytes}`, 413))
  return bodyBytes(request, maxBytes)
}

/** The body's text; 413 beyond `maxBytes`, 400 when it is not UTF-8. */
export const bodyText = (request: HttpServerRequest.HttpServerRequest, maxBytes: number): Effect.Effect<string, FhirError> => {
  const declared = Number(request.headers["content-length"] ?? "0")
  if (declared > maxBytes) return Effect.fail(fail("too-costly", `the request body has ${declared} bytes; the limit is ${maxBytes}`, 413))
  return Effect.flatMap(bodyBytes(request, maxBytes), (buffer) =>
    Effect.try({
      try: () => decoder.decode(buffer),
      catch: () => fail("structure", "the request body is not UTF-8 text")
    }))
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A JSON value (decimals keep their text: docs/formats.md), or a 400 saying where the JSON breaks. */
export const parseJson = (text: string): Effect.Effect<unknown, FhirError> =>
  Effect.try({
    try: () => parseKeepingDecimals(text),
    catch: (error) => fail("structure", `the body is not valid JSON: ${error instanceof Error ? error.message : String(error)}`)
  })

/** A resource from a create/update body, in JSON or XML by Content-Type (415 for others). */
export const readResource = (
  request: HttpServerRequest.HttpServerRequest,
  maxBytes: number,
  catalog: Catalog
): Effect.Effect<Record<string, unknown>, FhirError> =>
  Effect.gen(function*() {
    const format = bodyFormat(request.headers["content-type"])
    if (format === undefined || format === "json-patch") {
      return yield* fail("not-supported", `Content-Type ${request.headers["content-type"]} is not supported here: use application/fhir+json or application/fhir+xml`, 415)
    }
    const text = yield* bodyText(request, maxBytes)
    if (text.trim() === "") return yield* fail("required", "the request has no body; a resource is expected")
    const value = format === "xml" ? yield* parseXml(text, catalog) : yield* parseJson(text)
    if (!isObject(value)) return yield* fail("structure", "the body must be a JSON object holding a resource")
    const refused = checkBody(value, "the resource")
    if (refused !== undefined) return yield* refused
    if (format !== "xml") {
      const repeated = duplicateKeys(text, value, 1)[0]
      if (repeated !== undefined) return yield* Effect.fail(new FhirError({ code: "invalid", diagnostics: duplicateKeyText(repeated), status: 400, expression: [repeated.path] }))
    }
    return value
  })
