/** `Prefer: return=minimal | representation | OperationOutcome` on writes (http.html#ops). */
export type ReturnPreference = "minimal" | "representation" | "OperationOutcome"

export const returnPreference = (prefer: string | undefined): ReturnPreference => {
  const match = /(?:^|[;,\s])return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(prefer ?? "")
  if (match === null) return "representation"
  const value = match[1]!.toLowerCase()
  return value === "minimal" ? "minimal" : value === "operationoutcome" ? "OperationOutcome" : "representation"
}
