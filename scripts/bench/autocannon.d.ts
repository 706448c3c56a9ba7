// The part of autocannon 9's programmatic API the bench uses (the package ships no types).
declare module "autocannon" {
  import type { EventEmitter } from "node:events"

  namespace autocannon {
    interface Request {
      method?: string
      path?: string
      headers?: Record<string, string>
      body?: string | Buffer
      /** Mutates or replaces the request before it is sent; a falsy result restarts the sequence. */
      setupRequest?: (request: Request, context: Record<string, unknown>) => Request | undefined
      onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: Record<string, string>) => void
    }

    interface Options {
      url: string
      connections?: number
      /** Seconds. */
      duration?: number
      /** Seconds. */
      timeout?: number
      pipelining?: number
      /** Sent with every request; a request's own headers take precedence. */
      headers?: Record<string, string>
      requests?: Array<Request>
    }

    interface Result {
      /** Seconds. */
      duration: number
      errors: number
      timeouts: number
      non2xx: number
      totalCompletedRequests: number
      "2xx": number
      statusCodeStats: Record<string, { count: number }>
    }

    interface Instance extends EventEmitter {
      stop(): void
    }
  }

  function autocannon(options: autocannon.Options, done: (error: Error | null, result: autocannon.Result) => void): autocannon.Instance

  export = autocannon
}
