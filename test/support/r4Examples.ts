/**
 * The conformance resources of FHIR R4 core, taken from `hl7.fhir.r4.examples@4.0.1` (the npm registry this
 * machine is configured with has no `hl7.fhir.r4.core`). The tarball and its extraction are kept in a cache
 * directory under the OS temp dir between runs. When npm cannot reach a registry the caller skips with a
 * visible notice, except under CI=true, where that is a failure.
 */
import { execFile } from "node:child_process"
import { createRequire } from "node:module"
import { existsSync } from "node:fs"
import { mkdir, mkdtemp, readdir, readFile, rename, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { promisify } from "node:util"
import { conformanceTypes, inCore } from "../../src/packages/LoadedPackage.ts"

const run = promisify(execFile)

const spec = "hl7.fhir.r4.examples@4.0.1"
const tarball = "hl7.fhir.r4.examples-4.0.1.tgz"
export const cacheDir = join(tmpdir(), "svc-test-packages")


/** Renames `from` to `to` unless another run got there first. */
const publish = async (from: string, to: string): Promise<void> => {
  try {
    await rename(from, to)
  } catch (error) {
    if (!existsSync(to)) throw error
  } finally {
    await rm(from, { recursive: true, force: true })
  }
}

const download = async (): Promise<string> => {
  const target = join(cacheDir, tarball)
  if (existsSync(target)) return target
  await mkdir(cacheDir, { recursive: true })
  const scratch = await mkdtemp(join(cacheDir, "pack-"))
  try {
    await run("npm", ["pack", spec, "--pack-destination", scratch], { timeout: 120_000 })
    await publish(join(scratch, tarball), target)
  } finally {
    await rm(scratch, { recursive: true, force: true })
  }
  return target
}

interface TarModule {
  readonly x: (options: { readonly file: string; readonly cwd: string }) => Promise<void>
}

const untar = async (file: string, cwd: string): Promise<void> => {
  const require = createRequire(import.meta.url)
  let tarPath: string | undefined
  try {
    tarPath = require.resolve("tar")
  } catch {
    tarPath = undefined
  }
  if (tarPath !== undefined) {
    const tar: TarModule = await import(pathToFileURL(tarPath).href)
    await tar.x({ file, cwd })
  } else {
    await run("tar", ["-xzf", file, "-C", cwd])
  }
}

const extract = async (file: string): Promise<string> => {
  const target = join(cacheDir, "hl7.fhir.r4.examples-4.0.1")
  if (existsSync(join(target, "package", "package.json"))) return join(target, "package")
  const scratch = await mkdtemp(join(cacheDir, "extract-"))
  await untar(file, scratch)
  await publish(scratch, target)
  return join(target, "package")
}

/** The extracted package, or undefined (with a notice naming what is skipped) when no registry answers outside CI. */
const packageDirectory = async (skipped: string): Promise<string | undefined> => {
  try {
    return await extract(await download())
  } catch (error) {
    if (process.env["CI"] === "true") throw new Error(`${spec} is required under CI but could not be fetched: ${String(error)}`)
    console.warn(`NOTICE: ${skipped} skipped: could not fetch ${spec} with npm pack: ${String(error)}`)
    return undefined
  }
}

const readJson = async (dir: string, name: string): Promise<Record<string, unknown>> =>
  JSON.parse(await readFile(join(dir, name), "utf8"))

/** The conformance resources, or undefined (with a notice) when no registry answers outside CI. */
export const loadR4Conformance = async (): Promise<ReadonlyArray<Record<string, unknown>> | undefined> => {
  const dir = await packageDirectory("R4 catalog test")
  if (dir === undefined) return undefined
  const wanted = new Set<string>(conformanceTypes)
  const names = (await readdir(dir)).filter((name) => name.endsWith(".json") && wanted.has(name.slice(0, name.indexOf("-"))))
  const resources = await Promise.all(names.map((name) => readJson(dir, name)))
  return resources.filter((resource) => typeof resource["resourceType"] === "string" && wanted.has(resource["resourceType"]) && inCore(resource))
}

export interface ExampleFile {
  readonly file: string
  readonly resource: Record<string, unknown>
}

/** Every resource of the package (examples and conformance resources alike) with its file name, sorted by file. */
export const loadR4Examples = async (skipped: string): Promise<ReadonlyArray<ExampleFile> | undefined> => {
  const dir = await packageDirectory(skipped)
  if (dir === undefined) return undefined
  const names = (await readdir(dir)).filter((name) => name.endsWith(".json") && name !== "package.json" && !name.startsWith("."))
  names.sort()
  const files = await Promise.all(names.map(async (file): Promise<ExampleFile> => ({ file, resource: await readJson(dir, file) })))
  return files.filter(({ resource }) => typeof resource["resourceType"] === "string")
}

/** The named files of the package (`Patient-example.json`...), or undefined (with a notice) when no registry answers outside CI. */
export const readR4Examples = async (skipped: string, files: ReadonlyArray<string>): Promise<ReadonlyArray<Record<string, unknown>> | undefined> => {
  const dir = await packageDirectory(skipped)
  return dir === undefined ? undefined : Promise.all(files.map((file) => readJson(dir, file)))
}
