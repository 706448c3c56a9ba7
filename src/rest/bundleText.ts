/**
 * A response Bundle as JSON text, its entries given as text: stored resources are embedded as the
 * bytes they are, without parsing and serialising them again.
 */
import { randomUUID } from "node:crypto"
import { instantOf } from "../store/versions.ts"

export interface BundleHead {
  readonly type: string
  readonly total?: number | undefined
  readonly link?: ReadonlyArray<{ readonly relation: string; readonly url: string }> | undefined
}

export const bundleText = (head: BundleHead, entries: ReadonlyArray<string>, nowMillis: number): string => {
  const envelope = JSON.stringify({
    resourceType: "Bundle",
    id: randomUUID(),
    meta: { lastUpdated: instantOf(nowMillis * 1000) },
    type: head.type,
    ...(head.total === undefined ? {} : { total: head.total }),
    ...(head.link === undefined ? {} : { link: head.link })
  })
  // FHIR JSON has no empty arrays (https://hl7.org/fhir/R4/json.html): a Bundle without entries leaves `entry` out.
  return entries.length === 0 ? envelope : `${envelope.slice(0, -1)},"entry":[${entries.join(",")}]}`
}
