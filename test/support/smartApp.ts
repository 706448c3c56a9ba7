/**
 * A SMART app as a third party writes one, with the `fhirclient` library (SMART Health IT's JavaScript
 * client, used unchanged): a web app on 127.0.0.1 whose `/launch` starts the authorization (an EHR launch
 * when the EHR opens it with `iss` and `launch`, a standalone launch with `?standalone=<iss>`) and whose
 * `/callback` finishes it, exchanging the code. The client it ends with is kept for the test to use.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { createRequire } from "node:module"

// Loaded without its type declarations, which would bring the DOM's types into the whole project.
const smart: (request: IncomingMessage, response: ServerResponse, storage: unknown) => any = createRequire(import.meta.url)("fhirclient")

export interface SmartApp {
  readonly url: string
  readonly redirectUri: string
  /** The clients of the authorizations finished, newest last. */
  readonly clients: Array<any>
  /** Errors the app met, as messages. */
  readonly errors: Array<string>
  readonly close: () => Promise<void>
}

export interface SmartAppOptions {
  readonly clientId: string
  readonly scope: string
  readonly clientSecret?: string
}

/** Starts the app; the caller registers `redirectUri` for its client first, so the port is chosen here. */
export const startSmartApp = async (options: () => SmartAppOptions): Promise<SmartApp> => {
  const stored = new Map<string, unknown>()
  // fhirclient's storage interface: one user of the app at a time in these tests.
  const storage = {
    get: async (key: string) => stored.get(key),
    set: async (key: string, value: unknown) => void stored.set(key, value),
    unset: async (key: string) => stored.delete(key)
  }
  const clients: Array<any> = []
  const errors: Array<string> = []
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1")
    try {
      if (url.pathname === "/launch") {
        const { clientId, clientSecret, scope } = options()
        const standalone = url.searchParams.get("standalone")
        await smart(request, response, storage).authorize({
          clientId,
          scope,
          redirectUri: "/callback",
          pkceMode: "required",
          ...(clientSecret === undefined ? {} : { clientSecret }),
          ...(standalone === null ? {} : { iss: standalone })
        })
        return
      }
      if (url.pathname === "/callback") {
        const client = await smart(request, response, storage).ready()
        clients.push(client)
        response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
        response.end(`<!doctype html><html lang="en"><title>App</title><h1 id="ready">Ready</h1><p id="patient">${client.patient.id ?? ""}</p></html>`)
        return
      }
      response.writeHead(404).end()
    } catch (error) {
      errors.push(error instanceof Error ? error.message : String(error))
      if (!response.headersSent) response.writeHead(500, { "content-type": "text/plain" })
      response.end(`app error: ${error instanceof Error ? error.message : String(error)}`)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  const url = `http://127.0.0.1:${port}`
  return {
    url,
    redirectUri: `${url}/callback`,
    clients,
    errors,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
