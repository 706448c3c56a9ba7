/**
 * Proof Key for Code Exchange (RFC 7636) as the authorization server checks it. SMART App Launch 2.2 requires
 * PKCE with `S256` for every authorization code and forbids `plain`: an authorize request must carry a
 * `code_challenge` with `code_challenge_method=S256`, and the token request the `code_verifier` whose SHA-256,
 * base64url without padding, is that challenge.
 */
import { createHash, timingSafeEqual } from "node:crypto"

/** `code-verifier = 43*128unreserved` (RFC 7636, 4.1). */
const verifierPattern = /^[A-Za-z0-9\-._~]{43,128}$/

/** An S256 challenge: a SHA-256 digest in base64url without padding, 43 characters. */
const challengePattern = /^[A-Za-z0-9\-_]{43}$/

/** Why an authorize request's PKCE parameters are refused; undefined when they are a valid S256 challenge. */
export const challengeProblem = (challenge: string | undefined, method: string | undefined): string | undefined => {
  if (challenge === undefined || challenge === "") return "code_challenge is required (PKCE with S256)"
  if (method === undefined || method === "") return "code_challenge_method is required and must be S256"
  if (method === "plain") return "code_challenge_method plain is not allowed: use S256"
  if (method !== "S256") return `code_challenge_method ${method} is not supported: use S256`
  if (!challengePattern.test(challenge)) return "code_challenge is not an S256 challenge (43 characters of base64url)"
  return undefined
}

/** The S256 challenge of a verifier. */
export const s256 = (verifier: string): string => createHash("sha256").update(verifier, "ascii").digest("base64url")

/** Whether `verifier` is well formed and its S256 challenge is `challenge` (compared in constant time). */
export const verifies = (verifier: string | undefined, challenge: string): boolean => {
  if (verifier === undefined || !verifierPattern.test(verifier)) return false
  const computed = Buffer.from(s256(verifier), "ascii")
  const expected = Buffer.from(challenge, "ascii")
  return computed.length === expected.length && timingSafeEqual(computed, expected)
}
