import { describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { challengeProblem, s256, verifies } from "../../src/auth/pkce.ts"

// RFC 7636, Appendix B.
const rfcVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
const rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

describe("PKCE", () => {
  it("computes the S256 challenge of RFC 7636's example", () => {
    expect(s256(rfcVerifier)).toBe(rfcChallenge)
  })

  it("accepts an S256 challenge and refuses plain, other methods, and missing or malformed challenges", () => {
    expect(challengeProblem(rfcChallenge, "S256")).toBeUndefined()
    expect(challengeProblem(rfcChallenge, "plain")).toMatch(/plain is not allowed/)
    expect(challengeProblem(rfcChallenge, "S512")).toMatch(/S512 is not supported/)
    expect(challengeProblem(rfcChallenge, undefined)).toMatch(/code_challenge_method is required/)
    expect(challengeProblem(undefined, "S256")).toMatch(/code_challenge is required/)
    expect(challengeProblem("", "S256")).toMatch(/code_challenge is required/)
    expect(challengeProblem(rfcVerifier + "x", "S256")).toMatch(/not an S256 challenge/)
    expect(challengeProblem(rfcChallenge.replace("-", "+"), "S256")).toMatch(/not an S256 challenge/)
  })

  it("verifies the verifier of a challenge, and nothing else", () => {
    expect(verifies(rfcVerifier, rfcChallenge)).toBe(true)
    const verifier = randomBytes(48).toString("base64url")
    expect(verifies(verifier, s256(verifier))).toBe(true)
    expect(verifies(verifier, rfcChallenge)).toBe(false)
    expect(verifies(undefined, rfcChallenge)).toBe(false)
    // The challenge itself is no verifier (plain would accept it).
    expect(verifies(rfcChallenge, rfcChallenge)).toBe(false)
    // Too short, too long, or outside the unreserved characters: refused before hashing.
    expect(verifies("a".repeat(42), s256("a".repeat(42)))).toBe(false)
    expect(verifies("a".repeat(129), s256("a".repeat(129)))).toBe(false)
    expect(verifies("a".repeat(43), s256("a".repeat(43)))).toBe(true)
    expect(verifies(`${"a".repeat(42)}+`, s256(`${"a".repeat(42)}+`))).toBe(false)
    expect(verifies(rfcVerifier, "short")).toBe(false)
  })
})
