/**
 * The `$operations` the FHIR app dispatches to (src/operations/ serves them): a service, so that the app reaches
 * the operation modules, which are built on its requests and answers, only through this interface.
 */
import type { HttpServerResponse } from "@effect/platform"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, type Effect } from "effect"
import type { OperationLevel } from "../catalog/definitions.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { FhirError } from "../http/FhirError.ts"
import type { StoreError } from "../store/ResourceStore.ts"
import type { FhirRequest } from "./FhirRequest.ts"

/** Where a path invokes an operation: its name, level, and the type, id and version the path names. */
export interface OperationAt {
  readonly name: string
  readonly level: OperationLevel
  readonly type?: string | undefined
  readonly id?: string | undefined
  /** The version of `[base]/{type}/{id}/_history/{vid}/$op`. */
  readonly version?: string | undefined
}

export class Operations extends Context.Tag("svc/rest/Operations")<Operations, {
  /** The answer to a call of the operation at `at` with `method` (`path` names it in messages). */
  readonly invoke: (
    request: FhirRequest,
    method: string,
    path: string,
    at: OperationAt
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, FhirError | SqlError | StoreError | LeaseLost>
  /** The operations served on a resource type at type or instance level, or (undefined) at system level, for the CapabilityStatement. */
  readonly on: (type: string | undefined) => ReadonlyArray<{ readonly name: string; readonly definition: string }>
}>() {}
