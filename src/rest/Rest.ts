/** What the FHIR interactions need besides the database and the store: the base URL rule. */
import { Context } from "effect"

export class RestSettings extends Context.Tag("svc/rest/RestSettings")<RestSettings, {
  /** `server.public_url`; without it the base is taken from the request's Host. */
  readonly publicUrl: string | undefined
}>() {}

export const basePath = "/fhir"

/** `[base]` of a request: the public URL, or `http://<Host>/fhir`. */
export const baseUrl = (publicUrl: string | undefined, host: string | undefined): string =>
  publicUrl !== undefined
    ? `${publicUrl.replace(/\/+$/, "")}${basePath}`
    : `http://${host ?? "localhost"}${basePath}`
