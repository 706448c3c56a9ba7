/**
 * A large write does not hold other requests up (docs/performance.md, "One request and the others"): reads
 * by id sent while a large resource is being validated, indexed and inserted are answered before it is done.
 * What is asserted is the order of completion, not how long anything took.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { request as httpRequest } from "node:http"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/FairnessServer")<Server, TestServer>() {}

/** A Patient with `n` names: as many rows of the `family` index, and as many values to validate. */
const manyNames = (n: number) => ({
  resourceType: "Patient",
  gender: "female",
  name: Array.from({ length: n }, (_, i) => ({ family: `Large${i}` }))
})

/**
 * Sends `body` with node's client; `sent` runs once the whole body has been handed to the socket. The
 * body is small (one packet): what is sent after it reaches the server after the request is in hand.
 */
const send = (method: string, url: string, contentType: string, body: string, sent: () => void): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: { "content-type": contentType, "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.end(body, sent)
  })

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`fairness on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("reads by id sent while a large resource is patched are answered before the patch ends", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const small = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender: "male" } })
          expect(small.status).toBe(201)
          // A patch of one operation on a Patient of 30,000 names: a small request, and a new version with
          // 30,000 names to validate and 30,000 index rows to extract and insert.
          const large = yield* call("POST", `${base}/Patient`, { body: manyNames(30_000) })
          expect(large.status).toBe(201)
          const largeId = large.json.id as string
          const patch = JSON.stringify([{ op: "replace", path: "/gender", value: "other" }])
          const result = yield* Effect.promise(async () => {
            let patchDone = false
            let readsBefore = 0
            let reads = Promise.resolve()
            const patched = send("PATCH", `${base}/Patient/${largeId}`, "application/json-patch+json", patch, () => {
              // One read after another, each sent once the one before was answered, until the patch ends.
              reads = (async () => {
                while (!patchDone) {
                  const reply = await fetch(`${base}/Patient/${small.json.id}`)
                  await reply.text()
                  if (reply.status !== 200) throw new Error(`read answered ${reply.status}`)
                  if (!patchDone) readsBefore++
                }
              })()
            })
            const status = await patched
            patchDone = true
            await reads
            return { status, readsBefore }
          })
          expect(result.status).toBe(200)
          // Were the work done in one piece, every read would wait for the whole patch.
          expect(result.readsBefore).toBeGreaterThanOrEqual(3)
        }))
    })
  })
}
