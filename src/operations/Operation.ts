/** What an operation module is: how the registry (registry.ts) finds it and calls it. */
import type { OperationLevel } from "../catalog/definitions.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"

/**
 * A call: the request, and the resource type, id and version of the path (`[base]/{type}/{id}/$op`,
 * `[base]/{type}/{id}/_history/{vid}/$op`) when it names them.
 */
export interface OperationCall {
  readonly request: FhirRequest
  readonly type: string | undefined
  readonly id: string | undefined
  /** The version named by `_history/{vid}`, as the path gives it; only for a module that is `onVersions`. */
  readonly version?: string | undefined
}

export interface OperationModule<A> {
  /** The operation's name, without `$`. */
  readonly name: string
  readonly levels: ReadonlyArray<OperationLevel>
  /** The resource types it is served on at type and instance level; undefined: every type. */
  readonly types: ReadonlyArray<string> | undefined
  /** The url of the OperationDefinition its parameters are read from, for a type (or the system level). */
  readonly definition: (type: string | undefined) => string
  readonly methods: ReadonlyArray<"GET" | "POST">
  /**
   * The module checks the caller's access itself (`FhirRequest.access`, docs/smart.md, "Scopes"). Without it, the
   * registry lets it run only for a caller granted every permission on its type (system level: on every type).
   */
  readonly checksAccess?: boolean
  /** The module is served on a version of an instance too (`[base]/{type}/{id}/_history/{vid}/$op`). */
  readonly onVersions?: boolean
  readonly run: (call: OperationCall) => A
}
