/** The few parts of `oidc-provider` (which ships no types) that the tests' OpenID provider uses. */
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http"

  export interface Account {
    readonly accountId: string
    readonly claims: (use: string, scope: string) => Record<string, unknown> | Promise<Record<string, unknown>>
  }

  /** The provider's configuration (see its documentation): the tests set clients, claims, findAccount, pkce. */
  export type Configuration = Readonly<Record<string, unknown>>

  export class Provider {
    constructor(issuer: string, configuration?: Configuration)
    readonly issuer: string
    /** A Node request listener (the provider is a Koa application). */
    callback(): (req: IncomingMessage, res: ServerResponse) => void
    on(event: string, listener: (...args: ReadonlyArray<unknown>) => void): this
  }

  export default Provider
}
