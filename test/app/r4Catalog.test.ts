/**
 * The real R4 release defaults installed the way start-up installs them (fetched through the registry
 * npm is configured with, stored in the database), and the Catalog built back from the database.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { buildCatalog, installConfiguredPackages, releaseDefaults } from "../../src/app/Conformance.ts"
import { layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import { layer as fetcherLayer } from "../../src/packages/Fetcher.ts"
import { installedPackages } from "../../src/packages/Installer.ts"
import { layer as writerLayer } from "../../src/db/Writer.ts"
import { freshDatabase } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"

describe.skipIf(skipRealPackages)("the R4 catalog from the database", () => {
  it.live("has every resource type, the Patient and Observation search parameters and the patient compartment", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("sqlite")
      const database = yield* Layer.build(databaseLayer(options))
      yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
      const store = yield* Layer.build(Layer.provideMerge(writerLayer, Layer.succeedContext(database)))
      const fetcher = fetcherLayer({ cacheDir: realPackageCache, registry: registryUrl ?? "http://127.0.0.1:1", responseTimeout: "10 seconds" })
      yield* installConfiguredPackages(releaseDefaults("r4")).pipe(Effect.provide(fetcher), Effect.provide(store))
      const installed = yield* installedPackages.pipe(Effect.provide(store))
      expect(installed.map((p) => [p.name, p.version, p.substitutedFrom])).toEqual([
        ["hl7.fhir.r4.core", "4.0.1", "hl7.fhir.r4.examples@4.0.1"],
        ["hl7.terminology.r4", "7.0.1", null]
      ])
      const catalog = yield* buildCatalog(1).pipe(Effect.provide(store))
      expect(catalog.resourceTypes.length).toBeGreaterThanOrEqual(145)
      expect(catalog.isResourceType("Patient")).toBe(true)
      const patient = [...catalog.searchParameters("Patient").keys()]
      expect(patient).toEqual(expect.arrayContaining([
        "active", "address", "address-city", "address-country", "address-postalcode", "address-state", "address-use",
        "birthdate", "death-date", "deceased", "email", "family", "gender", "general-practitioner", "given",
        "identifier", "language", "link", "name", "organization", "phone", "phonetic", "telecom",
        "_id", "_lastUpdated", "_profile", "_security", "_source", "_tag", "_text", "_content"
      ]))
      const observation = [...catalog.searchParameters("Observation").keys()]
      expect(observation).toEqual(expect.arrayContaining([
        "code", "subject", "patient", "date", "value-quantity", "component-code", "code-value-quantity", "category", "encounter", "status"
      ]))
      const compartment = catalog.compartment("Patient")
      expect(compartment?.resources.get("Observation")).toEqual(expect.arrayContaining(["subject", "performer"]))
      expect(catalog.codeSystem("http://hl7.org/fhir/administrative-gender")?.concept("female")).toBeDefined()
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)), 600_000)
})
