#!/usr/bin/env node
/**
 * `npm run build`: bundles the server into one file, dist/svc.mjs, that Node runs without a TypeScript
 * loader. It starts in under a second where `node --import tsx src/main.ts` takes three to four (tsx
 * compiles every file, and Effect's packages load whole). better-sqlite3 (a native module) and the
 * optional pg-native stay outside the bundle. With `--if-stale` it builds only when a file under src/ or
 * package.json is newer than the bundle. `--out <file>` writes another file than dist/svc.mjs (the
 * tests' bundle, dist/svc-test.mjs; it must sit in dist/ to find the migrations).
 */
import { build } from "esbuild"
import { join, resolve } from "node:path"
import { bundlePath as outfile, bundleStale as stale, root } from "./bundle.mjs"

const out = process.argv.indexOf("--out")
const target = out === -1 ? outfile : resolve(process.argv[out + 1])

if (out !== -1 || !process.argv.includes("--if-stale") || stale()) {
  await build({
    entryPoints: [join(root, "src", "main.ts")],
    outfile: target,
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
