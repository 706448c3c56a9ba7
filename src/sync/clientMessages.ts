/**
 * Reading a client's message on `/sync` (docs/sync.md, "Messages"): one JSON object in a text frame, checked
 * against the client messages of protocol version 1. What is not one of them is answered `error` `BadMessage`
 * with the reason, and the connection stays open.
 */
import { Either, ParseResult, Schema } from "effect"
import { type ClientMessage, queryIdPattern } from "./protocol.ts"

const QueryId = Schema.String.pipe(
  Schema.pattern(queryIdPattern, { message: () => "a query id is 1 to 64 of A-Za-z0-9-_." })
)

/** The client messages of version 1; fields beyond these are ignored, as a later minor version may add some. */
export const ClientMessageSchema: Schema.Schema<ClientMessage> = Schema.Union(
  Schema.Struct({ type: Schema.Literal("auth"), token: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("subscribe"),
    id: QueryId,
    query: Schema.String,
    since: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), { exact: true })
  }),
  Schema.Struct({ type: Schema.Literal("unsubscribe"), id: QueryId }),
  Schema.Struct({ type: Schema.Literal("ping"), nonce: Schema.optionalWith(Schema.String, { exact: true }) })
)

const decode = Schema.decodeUnknownEither(ClientMessageSchema, { errors: "first" })

/** The message a text frame holds, or why it is not one (the text of an `error` `BadMessage`). */
export const readClientMessage = (text: string): Either.Either<ClientMessage, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return Either.left("the message is not JSON: send one JSON object with \"type\"")
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return Either.left("the message is not a JSON object: send one JSON object with \"type\"")
  }
  const type = (json as { readonly type?: unknown }).type
  if (type !== "auth" && type !== "subscribe" && type !== "unsubscribe" && type !== "ping") {
    return Either.left(`unknown message type ${JSON.stringify(type) ?? "(none)"}: a client sends auth, subscribe, unsubscribe or ping`)
  }
  return Either.mapLeft(decode(json), (error) => `not a valid ${type} message: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
}
