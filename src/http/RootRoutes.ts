/**
 * The paths outside the FHIR API (ARCHITECTURE: "Non-FHIR paths"; spec: Endpoints): one table of path,
 * methods and handler. An endpoint this build does not serve yet answers 501 `not-supported`; a method
 * the endpoint does not take, 405 with `Allow`; a path the table does not hold, 404 `not-found`.
 * A feature replaces its entries' `notBuilt` with its handler. The probes are answered before this table
 * (`Probes.ts`), and `/fhir` by the FHIR app.
 */
import { type HttpServerResponse, HttpServerRequest } from "@effect/platform"
import { Effect, Option } from "effect"
import { outcomeResponse } from "./OperationOutcome.ts"
import { anonymous, Principal } from "./Principal.ts"

/** A request as the table hands it to a handler. */
export interface RootRequest {
  readonly http: HttpServerRequest.HttpServerRequest
  /** The URL's path, without the query. */
  readonly path: string
  /** The `{name}` segments of the route's path, percent-decoded. */
  readonly params: Readonly<Record<string, string>>
  /** The caller, as the front door admitted it. */
  readonly principal: Principal
}

export type RootHandler<E = never, R = never> = (request: RootRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

export interface RootRoute<E = never, R = never> {
  /** Literal segments, and `{name}` for one non-empty segment: `/export/{job}/file`. */
  readonly path: string
  /**
   * The methods the endpoint takes (HEAD goes with GET), or `"any"` where neither the interface nor the
   * standards it follows fix them yet: every method is then the handler's to answer.
   */
  readonly methods: ReadonlyArray<string> | "any"
  readonly handler: RootHandler<E, R>
}

/** The answer of an endpoint of the interface that this build does not serve yet. */
export const notBuilt: RootHandler = (request) =>
  Effect.succeed(outcomeResponse("not-supported", `${request.path} is not available in this build yet`, { status: 501 }))

/** The answer for a path no route holds. */
export const noRoute = (method: string, path: string) => outcomeResponse("not-found", `no route for ${method} ${path}`)

const methodNotAllowed = (method: string, path: string, allowed: ReadonlyArray<string>) =>
  outcomeResponse("not-supported", `${method} is not allowed on ${path}`, { headers: { allow: allowHeader(allowed) } })

const allowHeader = (methods: ReadonlyArray<string>): string =>
  (methods.includes("GET") && !methods.includes("HEAD") ? [...methods, "HEAD"] : methods).join(", ")

/**
 * The table. Methods are those the interface gives, or else the standard it names: GraphQL over GET and
 * POST (https://hl7.org/fhir/R4/graphql.html), `/sync` and `/ws` (the websocket channel of Subscriptions,
 * https://hl7.org/fhir/R4/subscription.html) WebSockets (a handshake is a GET), the discovery
 * documents GET (SMART App Launch 2.2, OpenID Connect Discovery), `DELETE /export/{job}` the cancel of Bulk
 * Data 2.0. The interface leaves the paths and methods of the authorization server open; ARCHITECTURE
 * names its paths, and their methods come with it.
 */
export const rootRoutes: ReadonlyArray<RootRoute> = [
  { path: "/_usage", methods: ["GET"], handler: notBuilt },
  { path: "/_requests", methods: ["GET"], handler: notBuilt },
  { path: "/_audit", methods: ["GET"], handler: notBuilt },
  { path: "/_audit/verify", methods: ["GET"], handler: notBuilt },
  { path: "/sync", methods: ["GET"], handler: notBuilt },
  { path: "/ws", methods: ["GET"], handler: notBuilt },
  { path: "/graphql", methods: ["GET", "POST"], handler: notBuilt },
  { path: "/export/{job}", methods: ["GET", "DELETE"], handler: notBuilt },
  { path: "/export/{job}/file", methods: ["GET"], handler: notBuilt },
  { path: "/auth/authorize", methods: "any", handler: notBuilt },
  { path: "/auth/token", methods: "any", handler: notBuilt },
  { path: "/auth/register", methods: "any", handler: notBuilt },
  { path: "/auth/introspect", methods: "any", handler: notBuilt },
  { path: "/auth/revoke", methods: "any", handler: notBuilt },
  { path: "/auth/jwks", methods: "any", handler: notBuilt },
  { path: "/auth/login", methods: "any", handler: notBuilt },
  { path: "/auth/login/callback", methods: ["GET"], handler: notBuilt },
  { path: "/auth/picker", methods: ["GET", "POST"], handler: notBuilt },
  { path: "/auth/consent", methods: "any", handler: notBuilt },
  { path: "/auth/launch", methods: "any", handler: notBuilt },
  { path: "/.well-known/smart-configuration", methods: ["GET"], handler: notBuilt },
  { path: "/.well-known/openid-configuration", methods: ["GET"], handler: notBuilt },
  // SMART discovery is at [base]/.well-known/smart-configuration: under the FHIR base, answered by this table.
  { path: "/fhir/.well-known/smart-configuration", methods: ["GET"], handler: notBuilt }
]

/** The table with the handlers of `handlers` (by path) in place of those it has: a feature's endpoints. */
export const withHandlers = (routes: ReadonlyArray<RootRoute>, handlers: Readonly<Record<string, RootHandler>>): ReadonlyArray<RootRoute> =>
  routes.map((route) => (handlers[route.path] === undefined ? route : { ...route, handler: handlers[route.path]! }))

/** The `{name}` values when `path` fits `pattern`, else undefined. */
export const match = (pattern: string, path: string): Record<string, string> | undefined => {
  const want = pattern.split("/")
  const got = path.split("/")
  if (want.length !== got.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < want.length; i++) {
    const segment = want[i]!
    const value = got[i]!
    if (segment.startsWith("{") && segment.endsWith("}")) {
      if (value === "") return undefined
      try {
        params[segment.slice(1, -1)] = decodeURIComponent(value)
      } catch {
        return undefined
      }
    } else if (segment !== value) return undefined
  }
  return params
}

const takes = (methods: ReadonlyArray<string>, method: string): boolean =>
  methods.includes(method) || (method === "HEAD" && methods.includes("GET"))

/** The app that answers every path of `routes` (the first that fits), and a 404 for any other path. */
export const app = <E, R>(routes: ReadonlyArray<RootRoute<E, R>>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (http): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
    const path = new URL(http.url, "http://localhost").pathname
    for (const route of routes) {
      const params = match(route.path, path)
      if (params === undefined) continue
      if (route.methods !== "any" && !takes(route.methods, http.method)) {
        return Effect.succeed(methodNotAllowed(http.method, path, route.methods))
      }
      return Effect.flatMap(Effect.serviceOption(Principal), (principal) =>
        route.handler({ http, path, params, principal: Option.getOrElse(principal, () => anonymous("unknown")) }))
    }
    return Effect.succeed(noRoute(http.method, path))
  })
