/**
 * The real R4 release defaults through the registry npm on this machine is configured with. The
 * download happens once into a cache under the OS temp directory and is reused by later runs.
 * Skipped with a notice when no registry answers, except under CI=true.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { make, r4ReleaseDefaults } from "../../src/packages/Fetcher.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"

describe.skipIf(skipRealPackages)("the real R4 release defaults", () => {
  it.live("come from the npm registry, the core package taken from the R4 examples", () =>
    Effect.gen(function*() {
      const fetcher = yield* make({ cacheDir: realPackageCache, registry: registryUrl ?? "http://127.0.0.1:1", responseTimeout: "10 seconds" })
      const { packages, warnings } = yield* fetcher.fetch(r4ReleaseDefaults)
      expect(packages.map((p) => `${p.name}@${p.version}`)).toEqual(["hl7.fhir.r4.core@4.0.1", "hl7.terminology.r4@7.0.1"])
      const [core, terminology] = packages
      expect(core!.substitutedFrom).toBe("hl7.fhir.r4.examples@4.0.1")
      const ofType = (type: string) => core!.resources.filter((r) => r.resource["resourceType"] === type)
      expect(ofType("StructureDefinition").length).toBeGreaterThan(600)
      expect(ofType("SearchParameter").length).toBeGreaterThan(1000)
      expect(ofType("Patient")).toEqual([])
      const patientParams = ofType("SearchParameter")
        .filter((r) => Array.isArray(r.resource["base"]) && (r.resource["base"] as Array<unknown>).includes("Patient"))
        .map((r) => r.resource["code"])
      expect(patientParams).toEqual(expect.arrayContaining(["name", "birthdate", "gender", "identifier", "family"]))
      expect(ofType("CompartmentDefinition").map((r) => r.resource["id"])).toContain("patient")
      expect(terminology!.resources.filter((r) => r.resource["resourceType"] === "CodeSystem").length).toBeGreaterThan(500)
      // Its dependency on the core package is met by the stand-in; others may be missing from this registry.
      expect(warnings.map((w) => w.package)).not.toContain("hl7.fhir.r4.core@4.0.1")
    }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)), 600_000)
})
