/**
 * A replica's relay (docs/cluster.md; `Relay` in src/http/Server.ts), asked before the front door:
 *
 * - a request the primary must answer (`mustForward`: writes, Bundles, write operations, `$export` kick-offs, the
 *   authorization server, `/export`, `/ws`) is forwarded to `cluster.primary_url`, and the primary's answer relayed
 *   unchanged (forward.ts); the primary admits, meters and audits it;
 * - a read with `X-Svc-Min-Ts: <commit timestamp>` (the value of a write's `X-Svc-Commit-Ts`) is served once this
 *   replica has taken in every commit up to it: at once when it has, after a wait of at most `minTsWait` when it has
 *   not yet, and forwarded to the primary when the wait runs out; a value that is not a commit timestamp is a 400;
 * - everything else is served here, as on any server.
 */
import { Duration, Effect, Exit, Runtime } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { operationOutcome } from "../http/OperationOutcome.ts"
import type { Relay } from "../http/Server.ts"
import type { Forwarder } from "./forward.ts"
import { mustForward } from "./forwardRules.ts"

/** How long a read with `X-Svc-Min-Ts` waits for this replica to reach that commit before it goes to the primary. */
export const minTsWait = Duration.seconds(1)

export const minTsHeader = "x-svc-min-ts"

/** A commit timestamp as `X-Svc-Commit-Ts` gives it: microseconds since the epoch, digits only. */
const commitTsPattern = /^\s*(\d{1,17})\s*$/

const badMinTs = (response: ServerResponse, value: string) => {
  const body = JSON.stringify(operationOutcome([{
    severity: "error",
    code: "invalid",
    diagnostics: `X-Svc-Min-Ts must be a commit timestamp as X-Svc-Commit-Ts gives it (digits), not ${JSON.stringify(value.slice(0, 40))}`
  }]))
  response.writeHead(400, { "content-type": "application/fhir+json; charset=utf-8", "content-length": Buffer.byteLength(body) })
  response.end(body)
}

const clientOf = (request: IncomingMessage): string => request.socket.remoteAddress ?? ""

/** How far a replica has taken in the primary's commits: its change feed, and its catalog, which follows the feed. */
export interface Position {
  /** Waits until both hold every commit up to `commitTs` (a SearchParameter written then can be searched with). */
  readonly reached: (commitTs: number) => Effect.Effect<void>
}

export const makeRelay = (forwarder: Forwarder, position: Position, runtime: Runtime.Runtime<never>): Relay => {
  const forward = (request: IncomingMessage, response: ServerResponse) => {
    // forward.ts answers every failure itself (a 503 when the primary cannot be reached).
    void forwarder.request(request, response, clientOf(request)).catch(() => undefined)
  }
  const reached = (commitTs: number) =>
    position.reached(commitTs).pipe(Effect.timeoutTo({ duration: minTsWait, onSuccess: () => true, onTimeout: () => false }))
  return {
    request: (request, response, proceed) => {
      if (mustForward(request.method ?? "GET", request.url ?? "/")) {
        forward(request, response)
        return true
      }
      const header = request.headers[minTsHeader]
      if (header === undefined) return false
      const value = Array.isArray(header) ? header.join(",") : header
      const match = commitTsPattern.exec(value)
      if (match === null) {
        badMinTs(response, value)
        return true
      }
      const commitTs = Number(match[1])
      // Reached already, the wait ends at once and the request is served here.
      Runtime.runCallback(runtime)(reached(commitTs), {
        onExit: (exit) => {
          if (response.destroyed || response.writableEnded) return
          if (Exit.isSuccess(exit) && exit.value) proceed()
          else forward(request, response)
        }
      })
      return true
    },
    upgrade: (request, socket, head) => {
      if (!mustForward(request.method ?? "GET", request.url ?? "/")) return false
      forwarder.upgrade(request, socket, head, clientOf(request))
      return true
    }
  }
}
