/**
 * What a token's scopes allow (src/auth/access/Access.ts), per type and permission, with the fixture catalog
 * (its Patient CompartmentDefinition holds Observation and Patient): patient, user and system contexts, v1
 * and v2, v2 queries, several scopes together, a token without a patient, and the messages of a refusal.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { accessOf, type Rule } from "../../src/auth/access/Access.ts"
import { scopeQuery } from "../../src/auth/access/scopeQuery.ts"
import { forbidden, operationGranted } from "../../src/auth/access/enforce.ts"
import type { Permission } from "../../src/auth/scopes.ts"
import { build } from "../../src/catalog/Catalog.ts"
import type { Authorized, Principal } from "../../src/http/Principal.ts"

const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const catalog = build(readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8"))), 1)

const token = (scopes: string, patient?: string): Authorized => ({
  _tag: "Authorized",
  address: "127.0.0.1",
  clientId: "app",
  user: undefined,
  scopes: scopes.split(" "),
  patient
})

/** The rule of each permission on `type`, as `letter: tag` (Some as the grants' scopes). */
const rules = (principal: Principal, type: string): Record<Permission, string> => {
  const access = accessOf(principal)
  const show = (rule: Rule) => (rule._tag === "Some" ? rule.grants.map((grant) => `${grant.scope}@${grant.patient ?? "-"}`).join(" | ") : rule._tag)
  return Object.fromEntries((["c", "r", "u", "d", "s"] as const).map((p) => [p, show(access.rule(catalog, type, p))])) as Record<Permission, string>
}

describe("a token's access", () => {
  it("patient/ scopes grant the launch patient's compartment; types outside every compartment are read whole, never written", () => {
    expect(rules(token("patient/*.rs", "p1"), "Observation")).toEqual({ c: "None", r: "patient/*.rs@p1", u: "None", d: "None", s: "patient/*.rs@p1" })
    expect(rules(token("patient/*.cruds", "p1"), "Practitioner")).toEqual({ c: "None", r: "All", u: "None", d: "None", s: "All" })
    expect(rules(token("patient/Observation.cu", "p1"), "Observation")).toMatchObject({ c: "patient/Observation.cu@p1", r: "None", u: "patient/Observation.cu@p1" })
    expect(rules(token("patient/Observation.rs", "p1"), "Patient")).toEqual({ c: "None", r: "None", u: "None", d: "None", s: "None" })
  })

  it("reads v1 scopes as their v2 letters: read is r and s, write is c, u and d", () => {
    expect(rules(token("patient/*.read", "p1"), "Observation")).toEqual({ c: "None", r: "patient/*.read@p1", u: "None", d: "None", s: "patient/*.read@p1" })
    expect(rules(token("patient/Observation.write", "p1"), "Observation")).toMatchObject({ c: "patient/Observation.write@p1", r: "None", s: "None", d: "patient/Observation.write@p1" })
    expect(rules(token("user/*.*"), "Patient")).toEqual({ c: "All", r: "All", u: "All", d: "All", s: "All" })
  })

  it("user/ and system/ scopes grant the whole of what they name", () => {
    expect(rules(token("user/Observation.rs"), "Observation")).toEqual({ c: "None", r: "All", u: "None", d: "None", s: "All" })
    expect(rules(token("user/Observation.rs"), "Patient").r).toBe("None")
    expect(rules(token("system/*.rs"), "Patient")).toMatchObject({ r: "All", s: "All", c: "None" })
    expect(accessOf(token("system/*.rs")).wholly("s")).toBe(true)
    expect(accessOf(token("system/*.rs")).wholly("c")).toBe(false)
    expect(accessOf(token("patient/*.rs", "p1")).wholly("r")).toBe(false)
    expect(accessOf(token("system/Observation.rs")).wholly("r")).toBe(false)
  })

  it("adds several scopes up: a whole grant leaves no restriction, restricted ones stay alternatives", () => {
    expect(rules(token("patient/Observation.rs user/Observation.r", "p1"), "Observation")).toMatchObject({ r: "All", s: "patient/Observation.rs@p1" })
    expect(rules(token("patient/Patient.rs?gender=female patient/Patient.rs?gender=other", "p1"), "Patient").r)
      .toBe("patient/Patient.rs?gender=female@p1 | patient/Patient.rs?gender=other@p1")
    expect(rules(token("system/Patient.rs?gender=female"), "Patient").r).toBe("system/Patient.rs?gender=female@-")
    expect(rules(token("patient/Patient.rs?gender=female patient/Patient.rs", "p1"), "Patient").r)
      .toBe("patient/Patient.rs?gender=female@p1 | patient/Patient.rs@p1")
  })

  it("grants nothing through patient/ scopes without a patient, and nothing to a caller whose token is not resolved", () => {
    expect(rules(token("patient/*.cruds"), "Observation")).toEqual({ c: "None", r: "None", u: "None", d: "None", s: "None" })
    expect(rules(token("patient/*.cruds"), "Practitioner").r).toBe("None")
    expect(rules({ _tag: "Unresolved", address: "x", token: "t" }, "Observation").r).toBe("None")
    expect(rules({ _tag: "Anonymous", address: "x" }, "Observation")).toEqual({ c: "All", r: "All", u: "All", d: "All", s: "All" })
    expect(rules(token("openid fhirUser launch/patient not-a-scope", "p1"), "Patient").r).toBe("None")
  })

  it("is read once per principal object", () => {
    const principal = token("patient/*.rs", "p1")
    expect(accessOf(principal)).toBe(accessOf(principal))
    expect(accessOf(token("patient/*.rs", "p1"))).not.toBe(accessOf(principal))
  })

  it("reads a v2 query as a search on the type; one that cannot be searched grants nothing", () => {
    expect(scopeQuery(catalog, "Patient", [["gender", "female"]])?.clauses.map((clause) => clause.code)).toEqual(["gender"])
    expect(scopeQuery(catalog, "Patient", [["no-such-parameter", "x"]])).toBeUndefined()
    expect(scopeQuery(catalog, "Patient", [["_count", "1"]])).toBeUndefined()
    expect(scopeQuery(catalog, "Patient", [["_lastUpdated", "not-a-date"]])).toBeUndefined()
    expect(rules(token("patient/Patient.rs?no-such-parameter=x", "p1"), "Patient").r).toBe("None")
    expect(rules(token("patient/*.rs?gender=female", "p1"), "Patient").r).toBe("patient/*.rs?gender=female@p1")
    expect(rules(token("patient/*.rs?gender=female", "p1"), "Observation").r).toBe("None")
  })

  it("refuses with the scopes that would allow it", () => {
    const patientToken = forbidden(accessOf(token("patient/Observation.rs", "p1")), catalog, "Observation", "c")
    expect([patientToken.code, patientToken.status]).toEqual(["forbidden", 403])
    expect(patientToken.diagnostics).toContain("patient/Observation.c, user/Observation.c, system/Observation.c")
    expect(patientToken.diagnostics).toContain(".write")
    expect(forbidden(accessOf(token("patient/*.rs")), catalog, "Observation", "r").diagnostics).toContain("names no patient")
    expect(forbidden(accessOf(token("user/*.rs")), catalog, "Practitioner", "d").diagnostics).toContain("user/Practitioner.d, system/Practitioner.d")
  })

  it("lets an operation without rules of its own run only for a whole grant of every permission", () => {
    expect(operationGranted(accessOf(token("system/*.cruds")), catalog, "export", undefined)).toBeUndefined()
    expect(operationGranted(accessOf(token("user/Patient.cruds")), catalog, "meta", "Patient")).toBeUndefined()
    expect(operationGranted(accessOf(token("system/*.rs")), catalog, "export", undefined)?.status).toBe(403)
    expect(operationGranted(accessOf(token("patient/*.cruds", "p1")), catalog, "meta", "Patient")?.diagnostics).toContain("user/Patient.cruds")
    expect(operationGranted(accessOf({ _tag: "Anonymous", address: "x" }), catalog, "export", undefined)).toBeUndefined()
  })
})
