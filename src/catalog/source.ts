/**
 * Where a definition's full JSON comes from. The catalog keeps what it needs of every conformance
 * resource as a small summary; the rest (a snapshot, a code system's concepts, a value set's compose) is
 * read from the full JSON when first asked for. That JSON is either held as given (a catalog built from
 * parsed resources) or kept deflated and unpacked on demand into a cache bounded by size, with what was
 * derived from it (a catalog built from the database).
 */
import * as Zlib from "node:zlib"
import { isObject, type Json } from "./json.ts"

export interface Source {
  /** The resource as parsed JSON. */
  readonly json: () => Json
  /** `compute(json)`, computed once while the JSON is held and evicted with it. */
  readonly derived: <A>(key: string, compute: (json: Json) => A) => A
}

/** A source over JSON already parsed: held for the catalog's life. */
export const heldSource = (json: Json): Source => {
  const memo = new Map<string, unknown>()
  return {
    json: () => json,
    derived: <A>(key: string, compute: (json: Json) => A): A => {
      if (memo.has(key)) return memo.get(key) as A
      const value = compute(json)
      memo.set(key, value)
      return value
    }
  }
}

/**
 * The stored form of a resource's JSON text. Copied out of zlib's output, which is a view of a larger
 * chunk that every small result would otherwise keep alive.
 */
export const pack = (text: string): Uint8Array => new Uint8Array(Zlib.deflateRawSync(text, { level: 1 }))

const unpack = (packed: Uint8Array): { readonly json: Json; readonly size: number } => {
  const bytes = Zlib.inflateRawSync(packed)
  const parsed: unknown = JSON.parse(bytes.toString("utf8"))
  // A stored resource is always an object; anything else reads as an empty one rather than throwing.
  return { json: isObject(parsed) ? parsed : {}, size: bytes.length }
}

interface Unpacked {
  readonly json: Json
  readonly size: number
  readonly derived: Map<string, unknown>
}

/**
 * The unpacked resources of one catalog, least recently used first, evicted once their JSON text
 * exceeds `budgetBytes` in all (the one most recently used always stays).
 */
export const unpackCache = (budgetBytes: number) => {
  const held = new Map<Uint8Array, Unpacked>()
  let total = 0
  const get = (packed: Uint8Array): Unpacked => {
    const known = held.get(packed)
    if (known !== undefined) {
      held.delete(packed)
      held.set(packed, known)
      return known
    }
    const fresh: Unpacked = { ...unpack(packed), derived: new Map() }
    held.set(packed, fresh)
    total += fresh.size
    for (const [key, value] of held) {
      if (total <= budgetBytes || key === packed) break
      held.delete(key)
      total -= value.size
    }
    return fresh
  }
  const source = (packed: Uint8Array): Source => ({
    json: () => get(packed).json,
    derived: <A>(key: string, compute: (json: Json) => A): A => {
      const entry = get(packed)
      if (entry.derived.has(key)) return entry.derived.get(key) as A
      const value = compute(entry.json)
      entry.derived.set(key, value)
      return value
    }
  })
  return { source }
}

export type UnpackCache = ReturnType<typeof unpackCache>
