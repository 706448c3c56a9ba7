/**
 * `$install` over HTTP on SQLite and Postgres: a package by name from the configured sources (with its
 * dependency, in one transaction), by URL from a registry and a bucket, as a `.tgz` body or a base64 `archive`;
 * synchronous and with `Prefer: respond-async`; the search index taking an installed SearchParameter; and the
 * refusals, none of which changes anything. With the real R4 packages, a real implementation guide from the
 * npm registry this machine is configured with (skipped with a notice when none answers).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { fileURLToPath } from "node:url"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { layer as fetcherLayer } from "../../src/packages/Fetcher.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"
import { secrets, systemToken } from "../support/smartTokens.ts"
import { closedPort, type PackageDef, packageTgz, registry, s3Credentials, s3Server, tempDir, tgz } from "../packages/support.ts"

const fixtureMirror = fileURLToPath(new URL("../fixtures/packages/mirror", import.meta.url))

/** A package of one SearchParameter on Patient, `code`, over the given names. */
const withParameter = (name: string, version: string, code: string, extra: Partial<PackageDef> = {}): PackageDef => ({
  name,
  version,
  dependencies: { "hl7.fhir.r4.core": "4.0.1" },
  files: {
    [`package/SearchParameter-${code}.json`]: JSON.stringify({
      resourceType: "SearchParameter",
      id: code,
      url: `http://example.org/fhir/SearchParameter/${code}`,
      version,
      name: code,
      status: "active",
      code,
      base: ["Patient"],
      type: "string",
      expression: "Patient.name.where(use = 'nickname').given"
    })
  },
  ...extra
})

const registryPackages: ReadonlyArray<PackageDef> = [
  withParameter("test.install.dep", "1.0.0", "install-dep"),
  { ...withParameter("test.install.reg", "1.0.0", "install-reg"), dependencies: { "hl7.fhir.r4.core": "4.0.1", "test.install.dep": "1.0.0" } },
  withParameter("test.install.reg", "2.0.0", "install-reg"),
  withParameter("test.install.url", "1.0.0", "install-url"),
  withParameter("test.install.async", "1.0.0", "install-async"),
  withParameter("test.install.dep2", "1.0.0", "install-dep2"),
  { ...withParameter("test.install.lacking", "1.0.0", "install-lacking"), dependencies: { "test.install.dep2": "1.0.0", "test.install.nowhere": "1.0.0" } }
]

const bucketObjects = new Map([
  ["fhir/test.install.s3/-/test.install.s3-1.0.0.tgz", packageTgz(withParameter("test.install.s3", "1.0.0", "install-s3"))]
])

class Fixture extends Context.Tag("test/InstallFixture")<Fixture, TestServer & { readonly registry: string; readonly closed: number }>() {}

/** A server on the fixture R4 packages whose sources are the fixture mirror, a loopback registry and a loopback bucket. */
const fixtureServer = (kind: BackendKind) =>
  Layer.scoped(Fixture, Effect.gen(function*() {
    const reg = yield* registry(registryPackages)
    const s3 = yield* s3Server("packages", bucketObjects)
    const fetcher = fetcherLayer({
      registry: [fixtureMirror, reg.url, "s3://packages/fhir"],
      cacheDir: yield* tempDir,
      s3: { endpoint: s3.url, accessKeyId: Redacted.make(s3Credentials.accessKeyId), secretAccessKey: Redacted.make(s3Credentials.secretAccessKey) }
    })
    const server = yield* startServer(kind, { server: { max_body_bytes: 1_048_576 } }, fetcher)
    return { ...server, registry: reg.url, closed: yield* closedPort }
  }))

const install = (parameters: ReadonlyArray<Record<string, unknown>>, headers: Record<string, string> = {}) =>
  Effect.flatMap(Fixture, ({ base }) => call("POST", `${base}/$install`, { body: { resourceType: "Parameters", parameter: parameters }, headers }))

const sendArchive = (bytes: Buffer, contentType = "application/gzip") =>
  Effect.flatMap(Fixture, ({ base }) =>
    Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(`${base}/$install`, { method: "POST", headers: { "content-type": contentType }, body: bytes })
      const text = await response.text()
      return { status: response.status, headers: response.headers, text, json: text === "" ? undefined : JSON.parse(text) }
    }))

const get = (path: string, headers: Record<string, string> = {}) => Effect.flatMap(Fixture, ({ base }) => call("GET", `${base}/${path}`, { headers }))

/** The parts of each `package` parameter of an answer, by part name. */
const packagesOf = (reply: Reply): Array<Record<string, unknown>> =>
  (reply.json?.parameter ?? []).filter((p: any) => p.name === "package").map((p: any) =>
    Object.fromEntries(p.part.filter((part: any) => part.name !== "type").map((part: any) => [
      part.name,
      part.valueString ?? part.valueCode ?? part.valueBoolean ?? part.valueInteger
    ])))

const installedNames = Effect.map(get("$install"), (reply) => {
  expect(reply.status).toBe(200)
  return packagesOf(reply).map((pkg) => `${String(pkg["name"])}@${String(pkg["version"])}`)
})

const expectStatus = (reply: Reply, status: number) => expect([reply.status, reply.text.slice(0, 400)]).toEqual([status, reply.text.slice(0, 400)])

const diagnostics = (reply: Reply): string => (reply.json?.issue ?? []).map((issue: any) => issue.diagnostics).join(" ")

/** The patients of a search, by id. */
const found = (reply: Reply): Array<string> => (reply.json?.entry ?? []).map((entry: any) => entry.resource.id).sort()

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(backend.skip)(`$install on ${backend.kind}`, () => {
    layer(fixtureServer(backend.kind), { timeout: 120_000 })((it) => {
      it.effect("installs a .tgz sent as the body while serving; a search on its SearchParameter finds what was there before", () =>
        Effect.gen(function*() {
          const server = yield* Fixture
          const nick = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", name: [{ use: "nickname", given: ["Bodo"] }] } })
          expectStatus(nick, 201)
          expectStatus(yield* get("Patient?upload-nick=Bodo"), 400)
          const reply = yield* sendArchive(packageTgz(withParameter("test.install.upload", "1.0.0", "upload-nick")))
          expectStatus(reply, 200)
          expect(reply.json.resourceType).toBe("Parameters")
          expect(packagesOf(reply)).toEqual([expect.objectContaining({
            name: "test.install.upload",
            version: "1.0.0",
            status: "installed",
            dependency: false,
            source: "$install request body",
            resources: 1
          })])
          const types = reply.json.parameter.find((p: any) => p.name === "package").part.filter((part: any) => part.name === "type")
          expect(types).toEqual([{ name: "type", part: [{ name: "resourceType", valueCode: "SearchParameter" }, { name: "count", valueInteger: 1 }] }])
          expect(reply.json.parameter.find((p: any) => p.name === "resources").valueInteger).toBe(1)
          expectStatus(yield* get("Patient?upload-nick=x"), 200)
          // The catalog holds it once the answer comes; the index takes the Patient written before in the background.
          yield* server.searchIndexed
          const health = yield* call("GET", `${server.url}/healthz?verbose=1`)
          expect(health.json.search_index).toMatchObject({ state: "idle", failed: 0 })
          expect(health.json.search_index.generation).toBe(reply.json.parameter.find((p: any) => p.name === "generation").valueInteger)
          const search = yield* get("Patient?upload-nick=Bodo")
          expectStatus(search, 200)
          expect(found(search)).toEqual([nick.json.id])
          expect(yield* installedNames).toContain("test.install.upload@1.0.0")
        }))

      it.effect("installs a base64 archive of a Parameters body", () =>
        Effect.gen(function*() {
          const archive = packageTgz(withParameter("test.install.b64", "1.0.0", "install-b64")).toString("base64")
          const reply = yield* install([{ name: "archive", valueBase64Binary: archive }])
          expectStatus(reply, 200)
          expect(packagesOf(reply).map((pkg) => [pkg["name"], pkg["status"]])).toEqual([["test.install.b64", "installed"]])
          expectStatus(yield* get("Patient?install-b64=x"), 200)
        }))

      it.effect("installs name@version from the configured registry with the dependency it lacks; again, nothing changes", () =>
        Effect.gen(function*() {
          const reply = yield* install([{ name: "package", valueString: "test.install.reg@1.0.0" }])
          expectStatus(reply, 200)
          expect(packagesOf(reply).map((pkg) => [pkg["name"], pkg["status"], pkg["dependency"], pkg["source"]])).toEqual([
            ["test.install.dep", "installed", true, `registry ${(yield* Fixture).registry}`],
            ["test.install.reg", "installed", false, `registry ${(yield* Fixture).registry}`]
          ])
          expectStatus(yield* get("Patient?install-dep=x"), 200)
          const again = yield* install([{ name: "name", valueString: "test.install.reg" }, { name: "version", valueString: "1.0.0" }])
          expectStatus(again, 200)
          expect(packagesOf(again).map((pkg) => [pkg["name"], pkg["status"]])).toEqual([["test.install.reg", "already-installed"]])
          expect(again.json.parameter.find((p: any) => p.name === "outcome").resource.issue[0].diagnostics).toContain("nothing changed")
          const other = yield* install([{ name: "package", valueString: "test.install.reg@2.0.0" }])
          expectStatus(other, 409)
          expect(diagnostics(other)).toContain("test.install.reg@1.0.0 is installed")
        }))

      it.effect("installs by url: a tarball of the registry, an object of the bucket; a url outside the sources is refused", () =>
        Effect.gen(function*() {
          const { registry: reg, closed } = yield* Fixture
          const byUrl = yield* install([{ name: "url", valueUri: `${reg}/test.install.url/-/test.install.url-1.0.0.tgz` }])
          expectStatus(byUrl, 200)
          expect(packagesOf(byUrl).map((pkg) => [pkg["name"], pkg["status"]])).toEqual([["test.install.url", "installed"]])
          const byS3 = yield* install([{ name: "url", valueUri: "s3://packages/fhir/test.install.s3/-/test.install.s3-1.0.0.tgz" }])
          expectStatus(byS3, 200)
          expect(packagesOf(byS3)[0]).toMatchObject({ name: "test.install.s3", status: "installed" })
          expect(String(packagesOf(byS3)[0]!["source"])).not.toContain(s3Credentials.secretAccessKey)
          const outside = yield* install([{ name: "url", valueUri: `http://127.0.0.1:${closed}/test.install.url-1.0.0.tgz` }])
          expectStatus(outside, 403)
          expect(diagnostics(outside)).toContain("lies within none of the package sources")
          expectStatus(yield* install([{ name: "url", valueUri: "file:///etc/passwd" }]), 400)
          expectStatus(yield* install([{ name: "package", valueString: "/etc/passwd" }]), 400)
        }))

      it.effect("with Prefer: respond-async answers 202 and a status location that answers the result", () =>
        Effect.gen(function*() {
          const started = yield* install([{ name: "package", valueString: "test.install.async@1.0.0" }], { prefer: "respond-async" })
          expectStatus(started, 202)
          const location = started.headers.get("content-location")!
          expect(location).toMatch(/\/fhir\/\$install\?_job=[0-9a-f-]+$/)
          const now = yield* call("GET", location)
          expect([200, 202]).toContain(now.status)
          if (now.status === 202) expect(now.headers.get("x-progress")).not.toBeNull()
          const done = yield* call("GET", location, { headers: { prefer: "wait=30" } })
          expectStatus(done, 200)
          expect(packagesOf(done).map((pkg) => [pkg["name"], pkg["status"]])).toEqual([["test.install.async", "installed"]])
          expectStatus(yield* get("$install?_job=no-such-job"), 404)
        }))

      it.effect("a missing dependency installs nothing: neither the package nor the dependency it found", () =>
        Effect.gen(function*() {
          const reply = yield* install([{ name: "package", valueString: "test.install.lacking@1.0.0" }])
          expectStatus(reply, 422)
          expect(diagnostics(reply)).toContain("test.install.nowhere@1.0.0, required by test.install.lacking@1.0.0")
          expect(diagnostics(reply)).toContain("Nothing was installed")
          const names = yield* installedNames
          expect(names).not.toContain("test.install.lacking@1.0.0")
          expect(names).not.toContain("test.install.dep2@1.0.0")
          expectStatus(yield* get("Patient?install-dep2=x"), 400)
          expectStatus(yield* get("Patient?install-lacking=x"), 400)
        }))

      it.effect("a broken archive installs nothing, and one past the body limit is a 413", () =>
        Effect.gen(function*() {
          const before = yield* installedNames
          const notJson = tgz({
            "package/package.json": JSON.stringify({ name: "test.install.broken", version: "1.0.0", fhirVersions: ["4.0.1"] }),
            ...withParameter("test.install.broken", "1.0.0", "install-broken").files,
            "package/StructureDefinition-bad.json": "{ not json"
          })
          const broken = yield* sendArchive(notJson)
          expectStatus(broken, 422)
          expect(diagnostics(broken)).toContain("StructureDefinition-bad.json is not JSON")
          const truncated = yield* sendArchive(packageTgz(withParameter("test.install.cut", "1.0.0", "install-cut")).subarray(0, 60), "application/octet-stream")
          expectStatus(truncated, 422)
          expectStatus(yield* sendArchive(Buffer.from("plain text, not an archive")), 422)
          expectStatus(yield* get("Patient?install-broken=x"), 400)
          expect(yield* installedNames).toEqual(before)
          expectStatus(yield* sendArchive(Buffer.alloc(1_100_000, 1)), 413)
        }))

      it.effect("refuses what names no package, or more than one, and installs only with POST", () =>
        Effect.gen(function*() {
          expectStatus(yield* install([]), 400)
          expectStatus(yield* install([{ name: "package", valueString: "a@1.0.0" }, { name: "url", valueUri: "s3://packages/x.tgz" }]), 400)
          expectStatus(yield* install([{ name: "version", valueString: "1.0.0" }]), 400)
          expectStatus(yield* install([{ name: "archive", valueBase64Binary: "not base64!" }]), 400)
          expectStatus(yield* install([{ name: "nonsense", valueString: "x" }]), 400)
          const unknown = yield* install([{ name: "package", valueString: "test.install.nowhere@1.0.0" }])
          expectStatus(unknown, 404)
          expectStatus(yield* get("$install?package=test.install.reg@1.0.0"), 405)
        }))

      it.effect("lists $install at system level in the CapabilityStatement, and the installed packages on GET", () =>
        Effect.gen(function*() {
          const metadata = yield* get("metadata")
          expect(metadata.json.rest[0].operation).toContainEqual({ name: "install", definition: "urn:svc:OperationDefinition:install" })
          expect(yield* installedNames).toEqual(expect.arrayContaining(["hl7.fhir.r4.core@4.0.1", "hl7.terminology.r4@7.0.1"]))
        }))
    })
  })
}

class Real extends Context.Tag("test/InstallRealServer")<Real, TestServer>() {}

/** A small real implementation guide that depends on the R4 core and terminology packages only. */
const realGuide = "hl7.fhir.uv.extensions.r4@5.3.0-ballot-tc1"

for (const backend of backendsUnderTest) {
  // The guide's research-study extension and its SearchParameter share this id.
  const studyId = ["workflow", "researchStudy"].join("-")
  const studyExtension = `http://hl7.org/fhir/StructureDefinition/${studyId}`
  describe.skipIf(skipRealPackages || backend.skip)(`$install of a real implementation guide on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Real, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000 }
    )((it) => {
      it.effect("installs it while serving; its SearchParameter finds a Patient written before, once the index has caught up", () =>
        Effect.gen(function*() {
          const server = yield* Real
          const study = yield* call("POST", `${server.base}/ResearchStudy`, { body: { resourceType: "ResearchStudy", status: "active", title: "Install" } })
          expectStatus(study, 201)
          const enrolled = yield* call("POST", `${server.base}/Observation`, {
            body: {
              resourceType: "Observation",
              status: "final",
              code: { text: "enrolled" },
              extension: [{ url: studyExtension, valueReference: { reference: `ResearchStudy/${study.json.id}` } }]
            }
          })
          expectStatus(enrolled, 201)
          // R4 has the extension but not this search parameter on it: the guide brings it.
          const query = `${server.base}/Observation?researchStudy=ResearchStudy/${study.json.id}`
          expectStatus(yield* call("GET", query), 400)
          const reply = yield* call("POST", `${server.base}/$install?package=${encodeURIComponent(realGuide)}`)
          expectStatus(reply, 200)
          const [guide] = packagesOf(reply)
          expect(guide).toMatchObject({ name: "hl7.fhir.uv.extensions.r4", version: "5.3.0-ballot-tc1", status: "installed", dependency: false })
          const types = Object.fromEntries(reply.json.parameter.find((p: any) => p.name === "package").part
            .filter((part: any) => part.name === "type").map((part: any) => [part.part[0].valueCode, part.part[1].valueInteger]))
          expect(types["SearchParameter"]).toBe(19)
          expect(types["StructureDefinition"]).toBeGreaterThan(600)
          expect(guide!["resources"]).toBe(Object.values(types).reduce((sum: number, n) => sum + Number(n), 0))
          // Its dependency on another version of the terminology package is met by the one installed.
          const warnings = reply.json.parameter.find((p: any) => p.name === "outcome").resource.issue.filter((issue: any) => issue.severity === "warning")
          expect(warnings.map((issue: any) => issue.diagnostics).join(" ")).toContain("hl7.terminology.r4@7.0.1 is installed: keeping it")
          yield* server.searchIndexed
          const health = yield* call("GET", `${server.url}/healthz?verbose=1`)
          expect(health.json.search_index).toMatchObject({ state: "idle", failed: 0 })
          const search = yield* call("GET", query)
          expectStatus(search, 200)
          expect(found(search)).toEqual([enrolled.json.id])
          expectStatus(yield* call("GET", `${server.base}/SearchParameter/${studyId}`), 200)
          const xml = yield* call("GET", `${server.base}/$install?_format=xml`)
          expectStatus(xml, 200)
          expect(xml.headers.get("content-type")).toContain("application/fhir+xml")
          expect(xml.text).toContain("<valueString value=\"hl7.fhir.uv.extensions.r4\"/>")
        }), 300_000)
    })
  })
}

class Smart extends Context.Tag("test/InstallSmartServer")<Smart, TestServer>() {}

describe("$install under --smart", () => {
  layer(
    Layer.scoped(Smart, startServer("sqlite", { smart: { enabled: true, demo_login: true } }).pipe(Effect.provideService(SmartSecrets, secrets))),
    { timeout: 120_000, excludeTestServices: true }
  )((it) => {
    it.effect("is only for a caller granted every permission on every type", () =>
      Effect.gen(function*() {
        const server = yield* Smart
        const archive = packageTgz(withParameter("test.install.smart", "1.0.0", "install-smart")).toString("base64")
        const body = { resourceType: "Parameters", parameter: [{ name: "archive", valueBase64Binary: archive }] }
        const post = (token: string) => call("POST", `${server.base}/$install`, { body, headers: { authorization: `Bearer ${token}` } })
        const reader = yield* systemToken(server, "system/*.rs")
        const refused = yield* post(reader)
        expectStatus(refused, 403)
        expect(diagnostics(refused)).toContain("$install needs every permission on every type")
        expectStatus(yield* call("GET", `${server.base}/$install`, { headers: { authorization: `Bearer ${reader}` } }), 403)
        expectStatus(yield* call("POST", `${server.base}/$install`, { body }), 401)
        const admin = yield* systemToken(server, "system/*.cruds")
        const installed = yield* post(admin)
        expectStatus(installed, 200)
        expect(packagesOf(installed).map((pkg) => [pkg["name"], pkg["status"]])).toEqual([["test.install.smart", "installed"]])
      }))
  })
})
