/**
 * The registry npm on this machine is configured with, and whether it answers; tests that download
 * real FHIR packages skip with a notice when it does not, except under CI=true.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { r4PackageCache } from "./r4Template.ts"

export const registryUrl: string | undefined = process.env["npm_config_registry"] ??
  await promisify(execFile)("npm", ["config", "get", "registry"], { timeout: 15_000 }).then((r) => r.stdout.trim(), () => undefined)

const answers = registryUrl !== undefined &&
  await fetch(`${registryUrl.replace(/\/+$/, "")}/hl7.terminology.r4`, { signal: AbortSignal.timeout(5_000) })
    .then((r) => r.ok, () => false)

/** Skip the real-package tests: no registry answers and this is not CI. */
export const skipRealPackages = !answers && process.env["CI"] !== "true"
if (skipRealPackages) console.warn("NOTICE: real FHIR package tests skipped: no npm registry answers (CI=true makes this a failure)")

/** Shared by every test run on this machine, so the real packages download once. */
export const realPackageCache = r4PackageCache
