import { Duration } from "effect"

/** `Prefer: return=minimal | representation | OperationOutcome` on writes (http.html#ops). */
export type ReturnPreference = "minimal" | "representation" | "OperationOutcome"

export const returnPreference = (prefer: string | undefined): ReturnPreference => {
  const match = /(?:^|[;,\s])return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(prefer ?? "")
  if (match === null) return "representation"
  const value = match[1]!.toLowerCase()
  return value === "minimal" ? "minimal" : value === "operationoutcome" ? "OperationOutcome" : "representation"
}

/** `Prefer: respond-async` (the asynchronous pattern, https://hl7.org/fhir/R4/async.html). */
export const prefersAsync = (prefer: string | undefined): boolean => /(?:^|[;,\s])respond-async(?=$|[;,\s])/i.test(prefer ?? "")

/** `Prefer: handling=lenient` (https://hl7.org/fhir/R4/search.html#errors): set aside what cannot be used. */
export const prefersLenient = (prefer: string | undefined): boolean => /(?:^|[;,\s])handling\s*=\s*"?lenient"?(?=$|[;,\s"])/i.test(prefer ?? "")

/** `Prefer: wait=N` (RFC 7240) in seconds, at most `longest`; undefined when not asked. */
export const preferredWait = (prefer: string | undefined, longest: Duration.Duration): Duration.Duration | undefined => {
  const match = /(?:^|[;,\s])wait\s*=\s*"?(\d{1,6})"?/i.exec(prefer ?? "")
  return match === null ? undefined : Duration.min(Duration.seconds(Number(match[1])), longest)
}
