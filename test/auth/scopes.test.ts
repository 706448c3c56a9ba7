import { describe, expect, it } from "@effect/vitest"
import { grants, parseScope, parseScopes, type Permission } from "../../src/auth/scopes.ts"

const letters = (text: string): string => {
  const scope = parseScope(text)
  return scope._tag === "Resource" ? [...scope.permissions].join("") : scope._tag
}

describe("SMART scopes", () => {
  it("reads v1 resource scopes: read is read and search, write is create, update and delete, * is all", () => {
    expect(parseScope("patient/Observation.read")).toEqual({
      _tag: "Resource",
      text: "patient/Observation.read",
      context: "patient",
      type: "Observation",
      permissions: new Set(["r", "s"]),
      version: 1,
      query: []
    })
    expect(letters("user/*.write")).toBe("cud")
    expect(letters("system/*.*")).toBe("cruds")
  })

  it("reads v2 resource scopes: cruds letters in order, each once", () => {
    expect(letters("patient/Observation.rs")).toBe("rs")
    expect(letters("user/Patient.cruds")).toBe("cruds")
    expect(letters("system/Encounter.cud")).toBe("cud")
    expect(letters("patient/*.r")).toBe("r")
    expect(parseScope("patient/Observation.rs")).toMatchObject({ version: 2, query: [] })
  })

  it("reads a v2 scope's query as name and value pairs", () => {
    expect(parseScope("patient/Observation.rs?category=laboratory")).toMatchObject({
      type: "Observation",
      permissions: new Set(["r", "s"]),
      query: [["category", "laboratory"]]
    })
    expect(parseScope("patient/Observation.rs?category=http://terminology.hl7.org/CodeSystem/observation-category|vital-signs&status=final")).toMatchObject({
      query: [["category", "http://terminology.hl7.org/CodeSystem/observation-category|vital-signs"], ["status", "final"]]
    })
    expect(parseScope("patient/Observation.rs?code=a%7Cb")).toMatchObject({ query: [["code", "a|b"]] })
  })

  it("reads launch, identity and refresh scopes", () => {
    expect(parseScope("launch")).toEqual({ _tag: "Launch", text: "launch", context: undefined })
    expect(parseScope("launch/patient")).toEqual({ _tag: "Launch", text: "launch/patient", context: "patient" })
    expect(parseScope("launch/encounter")).toEqual({ _tag: "Launch", text: "launch/encounter", context: "encounter" })
    for (const name of ["openid", "fhirUser", "profile"]) expect(parseScope(name)).toEqual({ _tag: "Identity", text: name, name })
    for (const name of ["offline_access", "online_access"]) expect(parseScope(name)).toEqual({ _tag: "Refresh", text: name, name })
  })

  it("names what is wrong with a scope it cannot read, and grants nothing for it", () => {
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      ["patient/Observation.sr", /once each, in the order/],
      ["patient/Observation.rr", /once each, in the order/],
      ["patient/Observation.rx", /"x" is not a permission/],
      ["patient/Observation.", /at least one permission/],
      ["patient/Observation.read?category=laboratory", /v1 scope .* cannot be narrowed/],
      ["patient/Observation.rs?", /query after \? is empty/],
      ["patient/Observation.rs?category", /not a name=value pair/],
      ["patient/Observation.rs?category=", /has no value/],
      ["patient/Observation.rs?code=%E0%A4%A", /percent-encoded/],
      ["practitioner/Observation.rs", /not a SMART scope/],
      ["patient/observation.rs", /not a SMART scope/],
      ["launch/location", /not a SMART scope/],
      ["Patient.read", /not a SMART scope/]
    ]
    for (const [text, reason] of cases) {
      const scope = parseScope(text)
      expect([text, scope._tag]).toEqual([text, "Unknown"])
      expect(scope._tag === "Unknown" ? scope.reason : "").toMatch(reason)
      for (const permission of ["c", "r", "u", "d", "s"] as const) expect(grants(scope, "patient", "Observation", permission)).toBe(false)
    }
  })

  it("splits a scope value on spaces, each scope once", () => {
    expect(parseScopes("  launch/patient openid fhirUser patient/*.rs patient/*.rs offline_access ").map((scope) => scope.text))
      .toEqual(["launch/patient", "openid", "fhirUser", "patient/*.rs", "offline_access"])
    expect(parseScopes("")).toEqual([])
  })

  it("grants a permission on a type in its own context only, for the type or every type", () => {
    const check = (text: string, context: "patient" | "user" | "system", type: string, permission: Permission) =>
      grants(parseScope(text), context, type, permission)
    expect(check("patient/Observation.rs", "patient", "Observation", "r")).toBe(true)
    expect(check("patient/Observation.rs", "patient", "Observation", "s")).toBe(true)
    expect(check("patient/Observation.rs", "patient", "Observation", "c")).toBe(false)
    expect(check("patient/Observation.rs", "user", "Observation", "r")).toBe(false)
    expect(check("patient/Observation.rs", "patient", "Condition", "r")).toBe(false)
    expect(check("patient/*.rs", "patient", "Condition", "r")).toBe(true)
    expect(check("user/*.write", "user", "Patient", "u")).toBe(true)
    expect(check("user/*.write", "user", "Patient", "r")).toBe(false)
    expect(check("system/*.*", "system", "Group", "d")).toBe(true)
    expect(grants(parseScope("openid"), "user", "Patient", "r")).toBe(false)
  })

  it("grants a query-narrowed scope's type whole only when asked for part of it", () => {
    const narrowed = parseScope("patient/Observation.rs?category=laboratory")
    expect(grants(narrowed, "patient", "Observation", "r")).toBe(false)
    expect(grants(narrowed, "patient", "Observation", "r", { whole: false })).toBe(true)
    expect(grants(narrowed, "patient", "Observation", "c", { whole: false })).toBe(false)
  })
})
