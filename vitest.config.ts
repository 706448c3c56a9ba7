import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two test files at a time even on two cores (the default is one fewer than the cores): most of a test's
    // time is spent waiting on a server, Postgres or a child process, not computing.
    poolOptions: { forks: { minForks: 1, maxForks: 2 } }
  }
})
