/**
 * One walk over a parsed request body, before anything else reads it: it bounds the nesting depth (the
 * recursive readers after it, validation, patch, indexing and rendering, then cannot overflow the stack)
 * and refuses the characters FHIR text may not hold, in values and in property names
 * (src/validation/fhirText.ts). The walk itself is iterative, so any depth is safe to look at.
 * Limits: docs/rest.md.
 */
import { forbiddenCharIn, forbiddenCharRule } from "../validation/fhirText.ts"
import { FhirError } from "../http/FhirError.ts"

/**
 * The most levels of JSON objects and arrays (or XML elements) a body may nest. The deepest R4 example,
 * a Bundle of ValueSets, nests 22; a deep Questionnaire some 30.
 */
export const maxBodyDepth = 256

interface Frame {
  readonly value: object
  readonly parent: Frame | undefined
  readonly key: string | number
  readonly depth: number
}

/** `Bundle.entry[0].resource.name[1].family`; at most the first `shown` steps. */
const pathOf = (frame: Frame | undefined, last: string | number | undefined, root: string, shown = 12): string => {
  const steps: Array<string | number> = last === undefined ? [] : [last]
  for (let at = frame; at?.parent !== undefined; at = at.parent) steps.push(at.key)
  steps.reverse()
  let path = root
  for (const step of steps.slice(0, shown)) path += typeof step === "number" ? `[${step}]` : `.${step}`
  if (root === "" && path.startsWith(".")) path = path.slice(1)
  return steps.length > shown ? `${path}...` : path
}

const refuse = (code: "structure" | "invalid", diagnostics: string, path: string): FhirError =>
  new FhirError({ code, diagnostics, status: 400, expression: [path] })

/**
 * A 400 when `body` nests deeper than `maxBodyDepth` or holds a character FHIR text may not hold, naming
 * where; undefined when it passes. `what` names the body in messages (`the resource`, `the JSON Patch document`).
 */
export const checkBody = (body: unknown, what: string): FhirError | undefined => {
  if (typeof body === "string") {
    const found = forbiddenCharIn(body)
    return found === undefined ? undefined : refuse("invalid", `${what} holds ${found}: ${forbiddenCharRule}`, "")
  }
  if (typeof body !== "object" || body === null) return undefined
  const type = (body as Record<string, unknown>)["resourceType"]
  const root = typeof type === "string" && forbiddenCharIn(type) === undefined ? type : ""
  const stack: Array<Frame> = [{ value: body, parent: undefined, key: "", depth: 1 }]
  const badChar = (frame: Frame, key: string | number, text: string, found: string, inName: boolean) => {
    const path = pathOf(frame, inName ? undefined : key, root)
    const where = inName ? `a property name (${JSON.stringify(text)}) at ${path || "its root"}` : path || "its root"
    return refuse("invalid", `${what} holds ${found} in ${where}: ${forbiddenCharRule}`, path)
  }
  while (stack.length > 0) {
    const frame = stack.pop()!
    if (frame.depth > maxBodyDepth) {
      const path = pathOf(frame, undefined, root)
      return refuse("structure", `${what} nests deeper than the limit of ${maxBodyDepth} levels of objects and arrays (at ${path || "its root"})`, path)
    }
    const value = frame.value
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i]
        if (typeof item === "string") {
          const found = forbiddenCharIn(item)
          if (found !== undefined) return badChar(frame, i, item, found, false)
        } else if (typeof item === "object" && item !== null) {
          stack.push({ value: item, parent: frame, key: i, depth: frame.depth + 1 })
        }
      }
    } else {
      const record = value as Record<string, unknown>
      for (const key in record) {
        const inName = forbiddenCharIn(key)
        if (inName !== undefined) return badChar(frame, key, key, inName, true)
        const item = record[key]
        if (typeof item === "string") {
          const found = forbiddenCharIn(item)
          if (found !== undefined) return badChar(frame, key, item, found, false)
        } else if (typeof item === "object" && item !== null) {
          stack.push({ value: item, parent: frame, key, depth: frame.depth + 1 })
        }
      }
    }
  }
  return undefined
}
