import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { make } from "../../src/packages/Fetcher.ts"
import { type S3Settings } from "../../src/packages/sources/s3.ts"
import { amzDate, sign } from "../../src/packages/sigv4.ts"
import { closedPort, packageTgz, s3Credentials, s3Server, tempDir } from "./support.ts"

const settings = (endpoint: string, secret = s3Credentials.secretAccessKey): S3Settings => ({
  endpoint,
  accessKeyId: Redacted.make(s3Credentials.accessKeyId),
  secretAccessKey: Redacted.make(secret)
})

const objects = new Map([
  ["fhir/test.s3/-/test.s3-1.0.0.tgz", packageTgz({ name: "test.s3", version: "1.0.0" })],
  ["fhir/test.s3/-/test.s3-1.1.0.tgz", packageTgz({ name: "test.s3", version: "1.1.0" })]
])

describe("SigV4", () => {
  // The "get-vanilla" case of AWS's published Signature Version 4 test suite.
  it("signs the AWS test-suite request as AWS does", () => {
    const headers = sign({
      method: "GET",
      url: new URL("https://example.amazonaws.com/"),
      headers: {},
      payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      accessKeyId: "AKIDEXAMPLE",
      secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
      region: "us-east-1",
      service: "service",
      timeMillis: Date.UTC(2015, 7, 30, 12, 36, 0)
    })
    expect(headers["x-amz-date"]).toBe("20150830T123600Z")
    expect(headers["authorization"]).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, " +
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )
  })

  it("formats the request time from epoch milliseconds", () => {
    expect(amzDate(0)).toBe("19700101T000000Z")
  })
})

describe("S3 package source", () => {
  it.scopedLive("fetches an exact version and a range from a bucket, signing every request", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const s3 = yield* s3Server("packages", objects)
      const f = yield* make({ cacheDir: cache, registry: "s3://packages/fhir", s3: settings(s3.url) })
      const { packages } = yield* f.fetch(["test.s3@1.0.0"])
      expect(packages[0]).toMatchObject({ name: "test.s3", version: "1.0.0", source: `s3 s3://packages/fhir at ${s3.url}` })
      expect(packages[0]!.resources).toHaveLength(2)
      const ranged = yield* (yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: settings(s3.url) }))
        .fetch(["test.s3@^1.0.0"])
      expect(ranged.packages[0]!.version).toBe("1.1.0")
      expect(s3.requests).toContain("GET /packages?list-type=2&prefix=fhir%2Ftest.s3%2F-%2Ftest.s3-")
    }))

  it.scopedLive("a missing object is not found, naming the bucket", () =>
    Effect.gen(function*() {
      const s3 = yield* s3Server("packages", objects)
      const f = yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: settings(s3.url) })
      const error = yield* Effect.flip(f.fetch(["test.s3@9.9.9"]))
      expect(error._tag).toBe("PackageNotFound")
      expect(error.message).toContain("s3 s3://packages/fhir")
      expect(error.message).toContain("fhir/test.s3/-/test.s3-9.9.9.tgz")
    }))

  it.scopedLive("a wrong secret is a 403 S3Error that does not show the secret", () =>
    Effect.gen(function*() {
      const s3 = yield* s3Server("packages", objects)
      const f = yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: settings(s3.url, "wrong-secret") })
      const error = yield* Effect.flip(f.fetch(["test.s3@^1.0.0"]))
      expect(error._tag).toBe("S3Error")
      expect(error.message).toContain("HTTP 403")
      expect(error.message).toContain("SignatureDoesNotMatch")
      expect(error.message).toContain("test.s3@^1.0.0")
      expect(error.message).not.toContain("wrong-secret")
    }))

  it.scopedLive("a missing bucket is a 404 S3Error", () =>
    Effect.gen(function*() {
      const s3 = yield* s3Server("packages", objects)
      const f = yield* make({ cacheDir: yield* tempDir, registry: "s3://other/fhir", s3: settings(s3.url) })
      const error = yield* Effect.flip(f.fetch(["test.s3@latest"]))
      expect(error._tag).toBe("S3Error")
      expect(error.message).toContain("HTTP 404")
      expect(error.message).toContain("NoSuchBucket")
    }))

  it.scopedLive("a bad or unset endpoint is an S3Error; an unreachable one is skipped and reported", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.flip((yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: settings("not a url") }))
        .fetch(["test.s3@1.0.0"]))
      expect(bad.message).toContain("SVC_S3_ENDPOINT is not an http(s) URL")
      const unset = yield* Effect.flip((yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: {} }))
        .fetch(["test.s3@1.0.0"]))
      expect(unset._tag).toBe("S3Error")
      expect(unset.message).toContain("SVC_S3_ENDPOINT is not set")
      const port = yield* closedPort
      const down = yield* Effect.flip(
        (yield* make({ cacheDir: yield* tempDir, registry: "s3://packages/fhir", s3: settings(`http://127.0.0.1:${port}`) }))
          .fetch(["test.s3@1.0.0"])
      )
      expect(down._tag).toBe("PackageNotFound")
      expect(down.message).toContain(`s3 s3://packages/fhir at http://127.0.0.1:${port} (`)
    }))
})
