/**
 * A request Node's HTTP parser refuses before any handler sees it (headers larger than the limit, a
 * malformed request line or header, a body framing it cannot read) is answered with an OperationOutcome
 * like every other refusal (ARCHITECTURE.md, Errors), instead of Node's bare status line, and the
 * connection is closed: it cannot be read any further.
 */
import { STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { operationOutcome } from "./OperationOutcome.ts"

/** The request line and headers together may take this many bytes (Node's default is 16 KiB): a GET search naming a thousand alternatives fits. */
export const maxHeaderBytes = 64 * 1024

const answerOf = (code: string | undefined): { readonly status: number; readonly diagnostics: string } => {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, diagnostics: `the request line and headers are larger than ${maxHeaderBytes} bytes; send a long search as POST [base]/{type}/_search` }
    case "HPE_HEADERS_TIMEOUT":
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, diagnostics: "the request was not received in time" }
    default:
      return { status: 400, diagnostics: `the request is not valid HTTP/1.1${code === undefined ? "" : ` (${code})`}` }
  }
}

/** The `clientError` listener of the Node server. */
export const answerClientError = (error: Error & { readonly code?: string }, socket: Duplex): void => {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy()
    return
  }
  const { diagnostics, status } = answerOf(error.code)
  const body = JSON.stringify(operationOutcome([{ severity: "error", code: status === 408 ? "transient" : status === 431 ? "too-costly" : "structure", diagnostics }]))
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\ncontent-type: application/fhir+json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  )
}
