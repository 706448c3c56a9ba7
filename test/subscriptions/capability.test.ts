/**
 * The CapabilityStatement names the websocket channel's URL with R4's extension on `rest`, derived from
 * `server.public_url` (never from a Host header); without a public URL it names none.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { websocketExtension, websocketUrl } from "../../src/rest/capabilities.ts"
import { call, startServer } from "../support/server.ts"

describe("the websocket channel in the CapabilityStatement", () => {
  it("derives ws and wss URLs from the FHIR base", () => {
    expect(websocketUrl("https://fhir.example.org/fhir")).toBe("wss://fhir.example.org/ws")
    expect(websocketUrl("http://127.0.0.1:8080/fhir")).toBe("ws://127.0.0.1:8080/ws")
    expect(websocketUrl("https://example.org/prefix/fhir/")).toBe("wss://example.org/prefix/ws")
  })

  it.scoped("is named under server.public_url and not without it", () =>
    Effect.gen(function*() {
      const published = yield* startServer("sqlite", { server: { public_url: "https://fhir.example.org" } })
      const metadata = yield* call("GET", `${published.base}/metadata`, { headers: { host: "elsewhere.example" } })
      expect(metadata.status).toBe(200)
      expect(metadata.json.rest[0].extension).toEqual([{ url: websocketExtension, valueUri: "wss://fhir.example.org/ws" }])
      const plain = yield* startServer("sqlite")
      const bare = yield* call("GET", `${plain.base}/metadata`)
      expect(bare.json.rest[0].extension).toBeUndefined()
    }), 60_000)
})
