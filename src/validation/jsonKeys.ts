/**
 * A JSON object that names the same property twice (https://hl7.org/fhir/R4/json.html: a resource is a JSON
 * object whose properties are its elements, each once). `JSON.parse` keeps the last value without a word;
 * the HL7 reference validator reports each repeated property as an error.
 *
 * Cheap on the usual body: the properties of the parsed value are counted, and so are the text's property
 * names (a closing quote followed by `:`), in one pass of `indexOf`. A name repeated in one object
 * is counted in the text but not in the value, so equal counts mean no repeat. Only when the counts differ
 * (a repeat, or a string value that starts with `:`) is the text read token by token to find where.
 */

/**
 * How many property names the text may hold, never fewer than it holds: the colons that follow (after
 * whitespace) a quote no backslash escapes. A colon inside a string counts only when a quote opens the
 * string right before it.
 */
const namesInText = (text: string): number => {
  let count = 0
  for (let i = text.indexOf(":"); i >= 0; i = text.indexOf(":", i + 1)) {
    let j = i - 1
    let c = text.charCodeAt(j)
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text.charCodeAt(--j)
    if (c !== 0x22) continue
    let backslashes = 0
    while (text.charCodeAt(j - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) count++
  }
  return count
}

/** How many properties the parsed value holds, over all its objects. */
const propertiesInValue = (value: unknown): number => {
  let count = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const next = stack.pop()
    if (Array.isArray(next)) {
      for (const item of next) if (typeof item === "object" && item !== null) stack.push(item)
    } else if (typeof next === "object" && next !== null) {
      const record = next as Record<string, unknown>
      for (const key in record) {
        count++
        const item = record[key]
        if (typeof item === "object" && item !== null) stack.push(item)
      }
    }
  }
  return count
}

export interface DuplicateKey {
  /** Where, FHIRPath-style: `Patient.name[0].family`. */
  readonly path: string
  readonly key: string
}

interface ObjectFrame {
  readonly path: string
  readonly keys: Set<string>
  key: string
  expectKey: boolean
}

interface ArrayFrame {
  readonly path: string
  index: number
}

/** Reads text `JSON.parse` accepted, token by token, and lists the properties an object names again. */
const scan = (text: string, root: string, limit: number): ReadonlyArray<DuplicateKey> => {
  const found: Array<DuplicateKey> = []
  const stack: Array<ObjectFrame | ArrayFrame> = []
  const childPath = (): string => {
    const top = stack[stack.length - 1]
    if (top === undefined) return root
    if ("keys" in top) return top.path === "" ? top.key : `${top.path}.${top.key}`
    return `${top.path}[${top.index}]`
  }
  const n = text.length
  for (let i = 0; i < n && found.length < limit; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      let end = i + 1
      while (end < n && text.charCodeAt(end) !== 0x22) end += text.charCodeAt(end) === 0x5c ? 2 : 1
      const top = stack[stack.length - 1]
      if (top !== undefined && "keys" in top && top.expectKey) {
        const raw = text.slice(i, end + 1)
        const key = raw.includes("\\") ? JSON.parse(raw) as string : raw.slice(1, -1)
        if (top.keys.has(key)) found.push({ path: top.path === "" ? key : `${top.path}.${key}`, key })
        top.keys.add(key)
        top.key = key
        top.expectKey = false
      }
      i = end
    } else if (c === 0x7b) {
      stack.push({ path: childPath(), keys: new Set(), key: "", expectKey: true })
    } else if (c === 0x5b) {
      stack.push({ path: childPath(), index: 0 })
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop()
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1]
      if (top === undefined) continue
      if ("keys" in top) top.expectKey = true
      else top.index++
    }
  }
  return found
}

/**
 * The properties that an object of the JSON text names more than once (at most `limit`), given the text and
 * what `JSON.parse` made of it; empty for nearly every text after one count of each.
 */
export const duplicateKeys = (text: string, value: unknown, limit = 20): ReadonlyArray<DuplicateKey> => {
  if (typeof value !== "object" || value === null) return []
  if (namesInText(text) <= propertiesInValue(value)) return []
  const type = (value as Record<string, unknown>)["resourceType"]
  return scan(text, typeof type === "string" && /^[A-Za-z]{1,64}$/.test(type) ? type : "", limit)
}

/** The text of the issue for a repeated property. */
export const duplicateKeyText = (duplicate: DuplicateKey): string =>
  `The JSON property '${duplicate.key}' appears more than once in the same object (${duplicate.path}): only its last value would be kept`
