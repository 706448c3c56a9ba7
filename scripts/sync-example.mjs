#!/usr/bin/env node
/**
 * An example `/sync` client (docs/sync.md): keeps the result of one FHIR search live and prints it as it changes.
 *
 *   node scripts/sync-example.mjs http://127.0.0.1:8080 'Observation?code=http://loinc.org|8867-4'
 *
 * It subscribes, prints the first result, then one line per commit that changed it; when the connection drops it
 * opens a new one and resumes from the last commit it saw, so it misses nothing. With `SVC_TOKEN` set it sends the
 * token as `Authorization: Bearer` on the upgrade (under `--smart`). Ctrl-C ends it.
 */
import { WebSocket } from "ws"

const [server, query] = process.argv.slice(2)
if (server === undefined || query === undefined) {
  console.error("usage: node scripts/sync-example.mjs <server URL> '<Type?params>'")
  process.exit(2)
}

/** The result as this client holds it: `Type/id` → resource. */
const result = new Map()
let lastCommitTs
let stopping = false

const key = (resource) => `${resource.resourceType}/${resource.id}`

const connect = () => {
  const headers = process.env.SVC_TOKEN ? { authorization: `Bearer ${process.env.SVC_TOKEN}` } : {}
  const socket = new WebSocket(`${server.replace(/^http/, "ws").replace(/\/+$/, "")}/sync`, "svc.sync.v1", { headers })
  socket.on("open", () => {
    socket.send(JSON.stringify({ type: "subscribe", id: "example", query, ...(lastCommitTs === undefined ? {} : { since: lastCommitTs }) }))
  })
  socket.on("message", (data) => {
    const message = JSON.parse(String(data))
    switch (message.type) {
      case "result":
        result.clear()
        for (const resource of message.resources) result.set(key(resource), resource)
        lastCommitTs = message.commitTs
        console.log(`result at ${message.commitTs}: ${[...result.keys()].join(" ") || "(empty)"}`)
        break
      case "changes": {
        const changes = message.queries.example
        if (changes === undefined) break
        for (const resource of [...changes.entered, ...changes.changed]) result.set(key(resource), resource)
        for (const gone of changes.left) result.delete(gone)
        lastCommitTs = message.commitTs
        const entered = changes.entered.map(key).join(" ")
        const changed = changes.changed.map(key).join(" ")
        console.log(`commit ${message.commitTs}: entered [${entered}] changed [${changed}] left [${changes.left.join(" ")}]; ${result.size} in the result`)
        break
      }
      case "caughtUp":
        console.log(`caught up at ${message.commitTs}`)
        break
      case "reload":
        console.log(`reloading: ${message.reason}`)
        break
      case "QueryFailed":
        console.error(`the query failed (${message.code}): ${message.outcome?.issue?.[0]?.diagnostics ?? ""}`)
        stopping = true
        socket.close()
        process.exitCode = 1
        break
      case "closed":
      case "error":
        // Under --smart, the token expired or was revoked: a new one is needed (SVC_TOKEN of a new run).
        console.error(`${message.type === "closed" ? "the query was closed" : "error"} (${message.code}): ${message.reason ?? message.message}`)
        if (message.type === "closed" || message.code !== "BadMessage") {
          stopping = true
          socket.close()
          process.exitCode = 1
        }
        break
      default:
        break
    }
  })
  socket.on("close", () => {
    if (!stopping) setTimeout(connect, 1000)
  })
  socket.on("error", (error) => console.error(`connection: ${error.message}`))
  return socket
}

let socket = connect()
process.on("SIGINT", () => {
  stopping = true
  socket.close()
})
