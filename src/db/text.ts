/**
 * Text as the databases keep it. Postgres's text cannot hold U+0000 (a statement that binds it fails whole);
 * SQLite's can. Resources never hold it (src/rest/bodyCheck.ts refuses it), but what records a client's request
 * (the request log, the audit trail) may, and a look-up by a client's text may be given it.
 */

/** A control character: in no key the server makes or stores (ids, paths, addresses, callers, request ids). */
export const controlCharacter = /[\u0000-\u001f\u007f]/

/** `text` with U+0000 replaced by U+FFFD: what Postgres keeps of a text that holds it. */
export const withoutNul = (text: string): string => text.replaceAll("\u0000", "\uFFFD")
