/**
 * `$meta-add` (https://hl7.org/fhir/R4/resource-operation-meta-add.html): `POST [base]/{type}/{id}/$meta-add`
 * and `POST [base]/{type}/{id}/_history/{vid}/$meta-add` add the profiles, security labels and tags of the
 * Meta given as `meta` to the resource's current version, or to the version named, without making a new
 * version (metaEdit.ts). A tag or security label already there (same system and code) and a profile already
 * there (same URL) are not added again.
 */
import { editMeta, metaEditDefinitions } from "./metaEdit.ts"
import type { OperationCall, OperationModule } from "./Operation.ts"

const metaAdd = (call: OperationCall) => editMeta(call, "add")

export const metaAddModule = {
  name: "meta-add",
  levels: ["instance"],
  types: undefined,
  definition: () => metaEditDefinitions.add,
  methods: ["POST"],
  checksAccess: true,
  onVersions: true,
  run: metaAdd
} satisfies OperationModule<ReturnType<typeof metaAdd>>
