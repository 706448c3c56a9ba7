/** Where `npm run build` writes the bundle, and whether a source file is newer than it (plain JS: read before any build). */
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const root = fileURLToPath(new URL("../", import.meta.url))
export const bundlePath = join(root, "dist", "svc.mjs")

const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
    const path = join(dir, entry.name)
    return Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }, 0)

/** Whether the bundle is missing, or older than a file under src/ or package.json. */
export const bundleStale = () =>
  !existsSync(bundlePath) || Math.max(newest(join(root, "src")), statSync(join(root, "package.json")).mtimeMs) > statSync(bundlePath).mtimeMs
