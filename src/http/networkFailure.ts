/** The reasons a connection to another server fails, in words, by the code Node or undici gives the error. */
export const networkCodes: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host not found",
  ECONNRESET: "connection reset",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ETIMEDOUT: "connection timed out",
  UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  UND_ERR_SOCKET: "connection closed"
}

/** The words for an error's network code, when it has a known one. */
export const networkFailure = (error: unknown): string | undefined => {
  const code = typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined
  return code === undefined ? undefined : networkCodes[code]
}
