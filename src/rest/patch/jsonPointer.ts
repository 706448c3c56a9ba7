/** JSON Pointer, https://www.rfc-editor.org/rfc/rfc6901 */
import { Either } from "effect"

/** The reference tokens of a pointer, unescaped; `""` is the whole document. */
export const parsePointer = (pointer: string): Either.Either<ReadonlyArray<string>, string> => {
  if (pointer === "") return Either.right([])
  if (!pointer.startsWith("/")) return Either.left(`"${pointer}" is not a JSON Pointer: it must be empty or start with "/"`)
  if (/~(?![01])/.test(pointer)) {
    return Either.left(`"${pointer}" is not a JSON Pointer: "~" must be followed by 0 or 1`)
  }
  // ~1 first, then ~0, so that "~01" becomes "~1" and not "/" (RFC 6901 section 4).
  return Either.right(pointer.slice(1).split("/").map((token) => token.replaceAll("~1", "/").replaceAll("~0", "~")))
}

export const formatPointer = (tokens: ReadonlyArray<string>): string =>
  tokens.map((token) => `/${token.replaceAll("~", "~0").replaceAll("/", "~1")}`).join("")

/** An array index token: `0` or digits without a leading zero (RFC 6901 section 4). */
export const arrayIndex = (token: string): number | undefined =>
  /^(0|[1-9][0-9]*)$/.test(token) ? Number(token) : undefined
