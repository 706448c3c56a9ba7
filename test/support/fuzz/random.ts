/** A seeded random source (mulberry32): the same seed gives the same sequence, so a failing run can be replayed. */
export interface Random {
  /** A number in [0, 1). */
  readonly next: () => number
  /** An integer in [min, max]. */
  readonly int: (min: number, max: number) => number
  /** True with probability `p`. */
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
}

export const random = (seed: number): Random => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  return {
    next,
    int,
    chance: (p) => next() < p,
    pick: (items) => items[int(0, items.length - 1)]!
  }
}

/** Characters that break parsers, encoders and databases: controls, NUL, lone surrogates, non-characters, quotes, markup. */
const nasty = [
  "\u0000", "\u0001", "\u001f", "\u007f", "\ud800", "\udfff", "\ufffe", "\uffff", "\ufeff", "\u2028", "\r", "\n", "\t",
  "\"", "'", "\\", "<", ">", "&", "%", "%00", "%ZZ", "%ED%A0%80", "$", "|", ",", "*", "?", "#", "/", ":", ";", "=",
  "é", "日本", "🙂", "\u0301", " ", "", "null", "-", "."
]

/** A short string mixing plain text with characters from `nasty`. */
export const nastyString = (rnd: Random, maxLength = 24): string => {
  let out = ""
  const length = rnd.int(0, maxLength)
  while (out.length < length) {
    out += rnd.chance(0.3) ? rnd.pick(nasty) : String.fromCharCode(rnd.int(0x20, 0x7e))
  }
  return out
}

/** A value of a random JSON kind, nested at most `depth` deep. */
export const jsonValue = (rnd: Random, depth = 3): unknown => {
  switch (rnd.int(0, depth > 0 ? 8 : 5)) {
    case 0: return null
    case 1: return rnd.chance(0.5)
    case 2: return rnd.pick([0, -0, 1.5, -83.69471, 1e308, -1e-308, 9007199254740993, 2 ** 63, 105])
    case 3: return nastyString(rnd)
    case 4: return ""
    case 5: return rnd.pick(["2020-13-45", "1970-01-01T00:00:00Z", "urn:uuid:x", "Patient/1", "#", "http://", "0"])
    case 6: return Array.from({ length: rnd.int(0, 3) }, () => jsonValue(rnd, depth - 1))
    default: {
      const object: Record<string, unknown> = {}
      for (let i = rnd.int(0, 4); i > 0; i--) object[rnd.chance(0.7) ? rnd.pick(fieldNames) : nastyString(rnd, 8)] = jsonValue(rnd, depth - 1)
      return object
    }
  }
}

export const fieldNames = [
  "resourceType", "id", "meta", "text", "contained", "extension", "modifierExtension", "identifier", "active", "name",
  "family", "given", "telecom", "gender", "birthDate", "address", "subject", "reference", "code", "coding", "system",
  "value", "valueQuantity", "valueString", "status", "effectiveDateTime", "entry", "resource", "request", "method", "url",
  "fullUrl", "type", "_given", "_birthDate", "div", "versionId", "lastUpdated", "profile", "link", "other", "component"
]

/** JSON text nested `depth` deep in arrays or objects. */
export const deepJson = (rnd: Random, depth: number): string => {
  const object = rnd.chance(0.5)
  return object ? `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}` : `${"[".repeat(depth)}1${"]".repeat(depth)}`
}

/** Percent-encoding that also writes a lone surrogate (as the three bytes UTF-8 would give it), which `encodeURIComponent` refuses. */
export const percent = (text: string): string => {
  let out = ""
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1)
      if (low >= 0xdc00 && low <= 0xdfff) {
        out += encodeURIComponent(text.slice(i, i + 2))
        i++
        continue
      }
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join("")
    } else {
      out += encodeURIComponent(text[i]!)
    }
  }
  return out
}
