/** Temporary directories for the tests of one file (not for globalSetup, which cannot import vitest). */
import { afterAll } from "vitest"
import { tempDir } from "./process.ts"

/** A maker of temporary directories for one test file, all removed after its tests. */
export const scratchDirectories = (): (() => string) => {
  const dirs: Array<{ readonly remove: () => void }> = []
  afterAll(() => dirs.forEach((dir) => dir.remove()))
  return () => {
    const dir = tempDir()
    dirs.push(dir)
    return dir.path
  }
}
