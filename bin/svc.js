#!/usr/bin/env node
// Runs the TypeScript entry point through tsx, so `npm link` / `npx svc` work without a build step.
import { register } from "tsx/esm/api"
register()
await import("../src/main.ts")
