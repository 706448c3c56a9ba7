#!/usr/bin/env node
// Runs the bundle from `npm run build` (dist/svc.mjs) when it is there and newer than every source file,
// since it starts in under a second; otherwise the TypeScript entry point through tsx, so `npm link` /
// `npx svc` work without a build step.
import { bundlePath, bundleStale } from "../scripts/bundle.mjs"

if (!bundleStale()) {
  await import(bundlePath)
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/main.ts")
}
