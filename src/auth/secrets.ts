/**
 * Client secrets and bearer credentials as the authorization server keeps and compares them. A secret svc
 * generates is 32 random bytes (256 bits, base64url): so strong that one SHA-256 is enough to store it (no
 * password stretching is needed against guessing). Comparisons hash both sides first, so that they take the
 * same time whatever the lengths, and compare the digests in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

/** A new secret: 32 random bytes, base64url without padding (43 characters). */
export const generateSecret = (): string => randomBytes(32).toString("base64url")

/** The stored form of a secret: SHA-256, hex. */
export const hashSecret = (secret: string): string => createHash("sha256").update(secret, "utf8").digest("hex")

/** Whether `secret` hashes to `hash` (a `hashSecret` result), compared in constant time. */
export const matchesHash = (secret: string, hash: string): boolean => {
  const computed = Buffer.from(hashSecret(secret), "ascii")
  const expected = Buffer.from(hash, "ascii")
  return computed.length === expected.length && timingSafeEqual(computed, expected)
}

/** Whether two secrets are equal, in time that depends on neither. */
export const sameSecret = (given: string, expected: string): boolean => matchesHash(given, hashSecret(expected))

/**
 * The token of an `Authorization: Bearer <token>` header (RFC 6750 2.1; the scheme in any case); undefined when
 * the header is not one. Any visible characters are taken: the DCR token may be an operator's own secret.
 */
export const bearerToken = (header: string | undefined): string | undefined =>
  header === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(header)?.[1]
