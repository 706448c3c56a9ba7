/** The two kinds of server a run starts: svc itself, and the floor. Both only on 127.0.0.1. */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Child, startChild } from "./children.ts"

export const root = fileURLToPath(new URL("../../", import.meta.url))
const tsx = ["--import", "tsx"]

export type Backend = { readonly kind: "sqlite"; readonly file: string } | { readonly kind: "postgres"; readonly url: string }

/**
 * The environment of the developer's shell without its SVC_ variables, with the package source
 * pointed at the tests' tiny stand-in packages (Patient and Observation), so no network is needed.
 */
const svcEnv = (workDir: string): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("SVC_") && value !== undefined) env[key] = value
  }
  env["SVC_CONFORMANCE_PACKAGE_REGISTRY"] = join(root, "test", "fixtures", "packages", "mirror")
  env["SVC_CONFORMANCE_PACKAGE_CACHE"] = join(workDir, "package-cache")
  return env
}

/**
 * Starts `svc` on `backend` with its default settings (request log included), reading an empty
 * configuration file so that no svc.toml of the machine changes what is measured.
 */
export const startSvc = (backend: Backend, workDir: string): Promise<Child> => {
  const config = join(workDir, "svc.toml")
  writeFileSync(config, "# svc bench: every setting at its default\n")
  const database = backend.kind === "sqlite" ? ["--sqlite", backend.file] : ["--postgres", backend.url]
  return startChild({
    name: `svc-${backend.kind}`,
    args: [...tsx, join(root, "src", "main.ts"), "--config", config, ...database, "--bind", "127.0.0.1:0"],
    cwd: root,
    env: svcEnv(workDir),
    logDir: workDir,
    readyPath: "/readyz"
  })
}

/** Starts the floor server (floor.ts) on a better-sqlite3 file written by `seedFloor`. */
export const startFloor = (file: string, workDir: string): Promise<Child> =>
  startChild({
    name: "floor",
    args: [...tsx, fileURLToPath(new URL("floor.ts", import.meta.url)), file],
    cwd: root,
    env: svcEnv(workDir),
    logDir: workDir
  })
