/** Runs once per test run: reports up front whether the Postgres tests will run. */
import { postgresAvailable } from "./postgres.ts"

export default async function setup(): Promise<void> {
  await postgresAvailable()
}
