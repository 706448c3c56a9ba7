#!/usr/bin/env node
/**
 * `npm run build`: bundles the server into one file, dist/svc.mjs, that Node runs without a TypeScript
 * loader. It starts in under a second where `node --import tsx src/main.ts` takes three to four (tsx
 * compiles every file, and Effect's packages load whole). better-sqlite3 (a native module) and the
 * optional pg-native stay outside the bundle. With `--if-stale` it builds only when a file under src/ or
 * package.json is newer than the bundle.
 */
import { build } from "esbuild"
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../", import.meta.url))
const outfile = join(root, "dist", "svc.mjs")

const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
    const path = join(dir, entry.name)
    return Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }, 0)

const stale = () =>
  !existsSync(outfile) || Math.max(newest(join(root, "src")), statSync(join(root, "package.json")).mtimeMs) > statSync(outfile).mtimeMs

if (!process.argv.includes("--if-stale") || stale()) {
  await build({
    entryPoints: [join(root, "src", "main.ts")],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["better-sqlite3", "pg-native"],
    // Bundled CommonJS packages call require(); an ES module has none of its own.
    banner: { js: "import { createRequire as svcCreateRequire } from 'node:module'; const require = svcCreateRequire(import.meta.url);" },
    sourcemap: "linked",
    logLevel: "warning"
  })
}
