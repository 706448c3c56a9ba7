#!/usr/bin/env node
// Runs the bundle from `npm run build` (dist/svc.mjs) when it is there and newer than every source file,
// since it starts in under a second; otherwise the TypeScript entry point through tsx, so `npm link` /
// `npx svc` work without a build step.
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../", import.meta.url))
const bundle = join(root, "dist", "svc.mjs")
const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
    const path = join(dir, entry.name)
    return Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }, 0)

if (existsSync(bundle) && statSync(bundle).mtimeMs >= Math.max(newest(join(root, "src")), statSync(join(root, "package.json")).mtimeMs)) {
  await import(bundle)
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/main.ts")
}
