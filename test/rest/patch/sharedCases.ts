/**
 * The FHIR test cases shared beside the project (`../shared/data/fhir-test-cases`). When that folder is
 * absent the caller skips with a visible notice, except under CI=true, where that is a failure.
 */
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const projectRoot = new URL("../../../", import.meta.url)

export const readSharedCases = (relative: string): unknown => {
  const file = fileURLToPath(new URL(`../shared/data/fhir-test-cases/${relative}`, projectRoot))
  if (!existsSync(file)) {
    if (process.env["CI"] === "true") throw new Error(`shared test cases ${relative} are required under CI but absent`)
    console.warn(`NOTICE: shared test cases ${relative} absent; those tests are skipped`)
    return undefined
  }
  return JSON.parse(readFileSync(file, "utf8"))
}
