/**
 * `$meta-delete` (https://hl7.org/fhir/R4/resource-operation-meta-delete.html):
 * `POST [base]/{type}/{id}/$meta-delete` and `POST [base]/{type}/{id}/_history/{vid}/$meta-delete` remove the
 * profiles, security labels and tags of the Meta given as `meta` from the resource's current version, or from
 * the version named, without making a new version (metaEdit.ts). What the resource does not have is no error.
 */
import { editMeta, metaEditDefinitions } from "./metaEdit.ts"
import type { OperationCall, OperationModule } from "./Operation.ts"

const metaDelete = (call: OperationCall) => editMeta(call, "delete")

export const metaDeleteModule = {
  name: "meta-delete",
  levels: ["instance"],
  types: undefined,
  definition: () => metaEditDefinitions.delete,
  methods: ["POST"],
  checksAccess: true,
  onVersions: true,
  run: metaDelete
} satisfies OperationModule<ReturnType<typeof metaDelete>>
