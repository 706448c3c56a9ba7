/** The two kinds of server a run starts: svc itself, and the floor. Both only on 127.0.0.1. */
import { execFile, execFileSync } from "node:child_process"
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { type Child, startChild } from "./children.ts"
import { syntheaEnv } from "../../test/support/syntheaExtensions.ts"

export const root = fileURLToPath(new URL("../../", import.meta.url))
const tsx = ["--import", "tsx"]

export type Backend = { readonly kind: "sqlite"; readonly file: string } | { readonly kind: "postgres"; readonly url: string }

/**
 * Where svc gets its FHIR packages: the tests' tiny stand-ins (Patient and Observation; no network,
 * start-up in a second), or the real R4 packages from a registry (needed by workloads with other
 * resource types, such as Synthea's).
 */
export type Packages = { readonly kind: "stand-in" } | { readonly kind: "r4"; readonly registry: string }

/** Shared by every bench run on this machine, so the real packages download once. */
export const realPackageCache = join(tmpdir(), "svc-bench-fhir-packages")

/**
 * The registry npm is configured with, asked at run time (never written down), when it answers
 * for the R4 core package within 5 s; otherwise why not.
 */
export const npmRegistry = async (): Promise<{ readonly registry: string } | { readonly why: string }> => {
  const registry = process.env["npm_config_registry"] ??
    await promisify(execFile)("npm", ["config", "get", "registry"], { timeout: 15_000 }).then((r) => r.stdout.trim(), () => undefined)
  if (registry === undefined || registry === "" || registry === "undefined") return { why: "npm names no registry" }
  const answers = await fetch(`${registry.replace(/\/+$/, "")}/hl7.fhir.r4.core`, { signal: AbortSignal.timeout(5_000) })
    .then(async (r) => {
      await r.arrayBuffer()
      return r.ok
    }, () => false)
  return answers ? { registry } : { why: "the npm registry does not answer for hl7.fhir.r4.core" }
}

/** The environment of the developer's shell without its SVC_ variables, with the package source of `packages`. */
const svcEnv = (workDir: string, packages: Packages = { kind: "stand-in" }): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("SVC_") && value !== undefined) env[key] = value
  }
  if (packages.kind === "r4") {
    env["SVC_CONFORMANCE_PACKAGE_REGISTRY"] = packages.registry
    env["SVC_CONFORMANCE_PACKAGE_CACHE"] = realPackageCache
    // The Synthea workloads run here: their US Core and Synthea extensions are accepted without definitions,
    // and the vital signs profiles' findings on their blood pressures are warnings.
    Object.assign(env, syntheaEnv)
  } else {
    env["SVC_CONFORMANCE_PACKAGE_REGISTRY"] = join(root, "test", "fixtures", "packages", "mirror")
    env["SVC_CONFORMANCE_PACKAGE_CACHE"] = join(workDir, "package-cache")
  }
  return env
}

let built = false

/** The server as users start it with `npm start`: the bundle (scripts/build.mjs), built when stale. */
const bundle = (): string => {
  if (!built) execFileSync(process.execPath, [join(root, "scripts", "build.mjs"), "--if-stale"], { stdio: "inherit" })
  built = true
  return join(root, "dist", "svc.mjs")
}

/**
 * Starts `svc` on `backend` with its default settings (request log included), reading an empty
 * configuration file so that no svc.toml of the machine changes what is measured. With the real
 * R4 packages, a first start on a fresh database installs them (and downloads them on the first
 * run on this machine), so it is given five minutes. `nodeArgs` go to node before the bundle (the
 * profiler's `--cpu-prof`).
 */
export const startSvc = (
  backend: Backend,
  workDir: string,
  packages: Packages = { kind: "stand-in" },
  options: {
    readonly nodeArgs?: ReadonlyArray<string>
    readonly name?: string
    readonly killAfterMs?: number
    /** The configuration file's text; every setting at its default when not given. */
    readonly config?: string
    /** Variables added to the environment (a secret the configuration file should not hold). */
    readonly env?: Readonly<Record<string, string>>
  } = {}
): Promise<Child> => {
  const config = join(workDir, `${options.name ?? "svc"}.toml`)
  writeFileSync(config, options.config ?? "# svc bench: every setting at its default\n")
  const database = backend.kind === "sqlite" ? ["--sqlite", backend.file] : ["--postgres", backend.url]
  return startChild({
    name: options.name ?? `svc-${backend.kind}${packages.kind === "r4" ? "-r4" : ""}`,
    args: [...(options.nodeArgs ?? []), bundle(), "--config", config, ...database, "--bind", "127.0.0.1:0"],
    cwd: root,
    env: { ...svcEnv(workDir, packages), ...options.env },
    logDir: workDir,
    readyPath: "/readyz",
    ...(packages.kind === "r4" ? { timeoutMs: 300_000 } : {}),
    ...(options.killAfterMs === undefined ? {} : { killAfterMs: options.killAfterMs })
  })
}

/** The configuration of a svc with governance off (metering, the stored request log, the audit trail), to price it. */
export const ungoverned = "# svc bench: governance off\n[metering]\nenabled = false\n[request_log]\nstore = false\n[audit]\nenabled = false\n"

/** Starts the floor server (floor.ts) on a better-sqlite3 file written by `seedFloor`. */
export const startFloor = (file: string, workDir: string): Promise<Child> =>
  startChild({
    name: "floor",
    args: [...tsx, fileURLToPath(new URL("floor.ts", import.meta.url)), file],
    cwd: root,
    env: svcEnv(workDir),
    logDir: workDir
  })
