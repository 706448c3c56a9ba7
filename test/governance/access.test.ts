import { describe, expect, it } from "@effect/vitest"
import { governanceRefusal, grantsSystemRead } from "../../src/governance/access.ts"
import { anonymous, type Principal } from "../../src/http/Principal.ts"

const token = (scopes: ReadonlyArray<string>): Principal => ({ _tag: "Authorized", address: "127.0.0.1", clientId: "app", user: undefined, scopes, patient: undefined })

describe("the governance endpoints' scope", () => {
  it("is granted by system-level read of AuditEvent, v1 or v2, or of every type", () => {
    for (const scope of ["system/AuditEvent.read", "system/AuditEvent.*", "system/AuditEvent.rs", "system/AuditEvent.r", "system/AuditEvent.cruds", "system/*.read", "system/*.rs"]) {
      expect([scope, grantsSystemRead(scope, "AuditEvent")]).toEqual([scope, true])
    }
  })

  it("is not granted by user or patient scopes, writes, other types, or a v2 scope narrowed by a query", () => {
    for (const scope of ["user/AuditEvent.read", "patient/AuditEvent.rs", "system/AuditEvent.write", "system/AuditEvent.cud", "system/Patient.read", "system/AuditEvent.rs?type=rest", "system/AuditEvent.sr", "openid"]) {
      expect([scope, grantsSystemRead(scope, "AuditEvent")]).toEqual([scope, false])
    }
  })

  it("lets everyone read without --smart; under it, 401 without a token and 403 without the scope", () => {
    expect(governanceRefusal(anonymous("127.0.0.1"), false)).toBeUndefined()
    expect(governanceRefusal(token([]), false)).toBeUndefined()
    const unauthenticated = governanceRefusal(anonymous("127.0.0.1"), true)!
    expect(unauthenticated.status).toBe(401)
    expect(unauthenticated.headers["www-authenticate"]).toBe('Bearer scope="system/AuditEvent.read"')
    expect(governanceRefusal(token(["system/Patient.read"]), true)!.status).toBe(403)
    expect(governanceRefusal(token(["system/AuditEvent.read"]), true)).toBeUndefined()
  })
})
