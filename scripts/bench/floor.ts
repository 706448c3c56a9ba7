/**
 * The floor: the least any server could do to answer a read by id. A bare `node:http` server that
 * answers `GET /fhir/Patient/{id}` with the stored JSON from a better-sqlite3 file through one
 * prepared `SELECT content FROM t WHERE id = ?`. No routing library, no logging, no validation.
 *
 * Usage: node --import tsx scripts/bench/floor.ts <sqlite file>
 * Logs `{"message":"listening","port":<port>}` on standard output, on 127.0.0.1 and a free port.
 */
import Database from "better-sqlite3"
import { createServer } from "node:http"

const file = process.argv[2]
if (file === undefined) {
  console.error("usage: floor.ts <sqlite file>")
  process.exit(2)
}

const db = new Database(file, { readonly: true })
const select = db.prepare<[string], { content: string }>("SELECT content FROM t WHERE id = ?")
const prefix = "/fhir/Patient/"

const server = createServer((request, response) => {
  const url = request.url ?? ""
  const row = request.method === "GET" && url.startsWith(prefix) ? select.get(url.slice(prefix.length)) : undefined
  if (row === undefined) {
    response.writeHead(404, { "content-type": "application/fhir+json; charset=utf-8" })
    response.end('{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}')
    return
  }
  response.writeHead(200, {
    "content-type": "application/fhir+json; charset=utf-8",
    "content-length": Buffer.byteLength(row.content)
  })
  response.end(row.content)
})

server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  console.log(JSON.stringify({ message: "listening", port }))
})

const stop = () => server.close(() => {
  db.close()
  process.exit(0)
})
process.once("SIGTERM", stop)
process.once("SIGINT", stop)
