/**
 * The route table of the front door (src/http/Route.ts): each request classified from its method and path
 * as the FHIR app and the root table dispatch it, with the cost classes of the spec's rate-limit table.
 */
import { describe, expect, it } from "@effect/vitest"
import { classify, fhirBase } from "../../src/http/Route.ts"
import { basePath } from "../../src/rest/Rest.ts"

const table: ReadonlyArray<readonly [method: string, url: string, expected: Record<string, unknown>]> = [
  ["GET", "/fhir/Patient/p1", { interaction: "read", cost: "read", level: "instance", type: "Patient", id: "p1" }],
  ["HEAD", "/fhir/Patient/p1?_format=json", { interaction: "read", cost: "read", type: "Patient", id: "p1" }],
  ["GET", "/fhir/Patient/p1/_history/2", { interaction: "vread", cost: "read", type: "Patient", id: "p1", version: "2" }],
  ["GET", "/fhir/Patient/p1/_history", { interaction: "history", cost: "read", level: "instance" }],
  ["GET", "/fhir/Patient/_history", { interaction: "history", cost: "read", level: "type", type: "Patient" }],
  ["GET", "/fhir/_history", { interaction: "history", cost: "read", level: "system" }],
  ["GET", "/fhir/Patient?name=x", { interaction: "search", cost: "search", level: "type", type: "Patient" }],
  ["POST", "/fhir/Patient/_search", { interaction: "search", cost: "search", level: "type", type: "Patient" }],
  ["GET", "/fhir?_type=Patient", { interaction: "search", cost: "search", level: "system" }],
  ["POST", "/fhir/_search", { interaction: "search", cost: "search", level: "system" }],
  ["GET", "/fhir/Patient/p1/Observation", { interaction: "search", cost: "search", level: "instance", type: "Patient", id: "p1", target: "Observation" }],
  ["POST", "/fhir/Patient/p1/*/_search", { interaction: "search", cost: "search", target: "*" }],
  ["POST", "/fhir/Patient", { interaction: "create", cost: "write", type: "Patient" }],
  ["PUT", "/fhir/Patient/p1", { interaction: "update", cost: "write", id: "p1", conditional: false }],
  ["PUT", "/fhir/Patient?identifier=a|b", { interaction: "update", cost: "write", id: undefined, conditional: true }],
  ["PATCH", "/fhir/Patient/p1", { interaction: "patch", cost: "write" }],
  ["DELETE", "/fhir/Patient?name=x", { interaction: "delete", cost: "write", conditional: true }],
  ["POST", "/fhir", { interaction: "batch-or-transaction", cost: "bundle" }],
  ["POST", "/fhir/", { interaction: "batch-or-transaction", cost: "bundle" }],
  ["GET", "/fhir/metadata", { interaction: "capabilities", cost: "read" }],
  ["POST", "/fhir/Patient/$validate", { interaction: "operation", cost: "operation", level: "type", type: "Patient", operation: "validate" }],
  ["GET", "/fhir/Patient/p1/$everything", { interaction: "operation", cost: "operation", level: "instance", id: "p1", operation: "everything" }],
  ["GET", "/fhir/$export", { interaction: "operation", cost: "export", level: "system", operation: "export" }],
  ["GET", "/fhir/Group/g/$export", { interaction: "operation", cost: "export", level: "instance" }],
  ["GET", "/fhir/Patient/p%2D1", { interaction: "read", id: "p-1" }],
  ["GET", "/fhir/Patient/%E0%A4%A", { interaction: "unknown" }],
  ["GET", "/sync", { interaction: "root-endpoint", cost: "sync" }],
  ["POST", "/graphql", { interaction: "root-endpoint", cost: "operation" }],
  ["GET", "/export/job-1/file", { interaction: "root-endpoint", cost: "read" }],
  ["GET", "/_usage?day=1", { interaction: "root-endpoint", cost: "read" }],
  ["POST", "/auth/token", { interaction: "root-endpoint", cost: "read" }],
  ["GET", "/fhirx/Patient/p1", { interaction: "unknown", cost: "read" }],
  ["GET", "/nothing", { interaction: "unknown", cost: "read" }],
  ["POST", "/fhir/Patient/p1", { interaction: "unknown" }],
  ["GET", "/fhir/a/b/c/d/e", { interaction: "unknown" }]
]

describe("the route table", () => {
  it("is based where the FHIR app is", () => {
    expect(fhirBase).toBe(basePath)
  })

  it("classifies each interaction, operation and root endpoint with its cost class", () => {
    for (const [method, url, expected] of table) {
      expect([method, url, classify(method, url)]).toEqual([method, url, expect.objectContaining(expected)])
    }
  })
})
