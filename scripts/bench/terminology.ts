/**
 * The terminology workloads of the bench: `$expand` with a text filter over a ValueSet of 12,000 codes (a
 * CodeSystem and its ValueSet written over REST first, as a user would), and `$validate-code` of codes against
 * that ValueSet.
 * They run in `npm run bench` on its server with the real R4 packages (suite.ts, `onSynthea`), and on their
 * own with `npm run bench:terminology` (terminologyRun.ts), which needs no Synthea data. See
 * docs/performance.md, "Terminology".
 */
import type autocannon from "autocannon"
import { rotation } from "./rotation.ts"
import type { LoadWorkload, Target } from "./suite.ts"

/** Codes of the ValueSet the `$expand` workload filters: more than search's `:in` takes (10,000). */
export const expandCodes = 12_000

const words = [
  ["acute", "chronic", "recurrent", "congenital", "traumatic", "postoperative"],
  ["abdominal", "thoracic", "cranial", "lumbar", "pelvic", "cervical", "femoral", "renal"],
  ["pain", "fracture", "infection", "lesion", "swelling", "haemorrhage", "obstruction"],
  ["left", "right", "bilateral"]
] as const

/** The display of code `n`: "Chronic abdominal pain, left (finding 1234)", every combination in turn. */
export const findingDisplay = (n: number): string => {
  const pick = (list: ReadonlyArray<string>, divisor: number) => list[Math.floor(n / divisor) % list.length]!
  const [a, b, c, d] = words
  const first = pick(a, 1)
  return `${first[0]!.toUpperCase()}${first.slice(1)} ${pick(b, 6)} ${pick(c, 48)}, ${pick(d, 336)} (finding ${n})`
}

/** What a user types into a picker, in turn: word starts, two words, a number; each matches some codes. */
const filters = ["abdo", "chronic pain", "fract left", "haem", "renal infection right", "finding 117", "lumb", "postop swell", "cerv", "obstr bilat"]

const fhirJson = { "content-type": "application/fhir+json", accept: "application/fhir+json" }

/** Writes the CodeSystem and ValueSet (once per server) and waits until the catalog has them; the ValueSet's url. */
const writeTerminology = async (target: Target): Promise<string> => {
  const system = "http://terminology.bench.test/CodeSystem/findings"
  const valueSet = "http://terminology.bench.test/ValueSet/findings"
  const probe = `${target.url}/fhir/ValueSet/$expand?url=${encodeURIComponent(valueSet)}&count=0`
  const held = await fetch(probe, { headers: { ...target.headers, accept: "application/fhir+json" } })
  await held.arrayBuffer()
  if (held.status !== 200) {
    const concept = Array.from({ length: expandCodes }, (_, n) => ({ code: `F${n}`, display: findingDisplay(n) }))
    for (const [type, body] of [
      ["CodeSystem", { resourceType: "CodeSystem", url: system, status: "active", content: "complete", concept }],
      ["ValueSet", { resourceType: "ValueSet", url: valueSet, name: "BenchFindings", status: "active", compose: { include: [{ system }] } }]
    ] as const) {
      const response = await fetch(`${target.url}/fhir/${type}`, { method: "POST", headers: { ...target.headers, ...fhirJson }, body: JSON.stringify(body) })
      const text = await response.text()
      if (response.status !== 201) throw new Error(`POST ${type} answered ${response.status}: ${text.slice(0, 300)}`)
    }
  }
  // The catalog is rebuilt once the writes pause (src/search/CatalogReload.ts): wait for it, at most 60 s.
  for (let waited = 0; ; waited += 250) {
    const response = await fetch(probe, { headers: { ...target.headers, accept: "application/fhir+json" } })
    const text = await response.text()
    if (response.status === 200) {
      const total = (JSON.parse(text) as { expansion?: { total?: number } }).expansion?.total
      if (total !== expandCodes) throw new Error(`the bench ValueSet has ${String(total)} codes, not ${expandCodes}`)
      return valueSet
    }
    if (waited > 60_000) throw new Error(`$expand of the bench ValueSet still answers ${response.status}: ${text.slice(0, 300)}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

/** GETs of `paths`, one after the other in turn. */
const inTurn = (paths: ReadonlyArray<string>): Array<autocannon.Request> => {
  const next = rotation(paths.length)
  return [{ method: "GET", path: paths[0] ?? "", headers: { accept: "application/fhir+json" }, setupRequest: (request: autocannon.Request) => ({ ...request, path: paths[next()] ?? "" }) }]
}

/** `$expand` with a text filter over the 12,000 codes, the first page of 20, filters in turn. */
export const expandFiltered: LoadWorkload = {
  name: "$expand filter",
  description: `GET /fhir/ValueSet/$expand?url=<a ValueSet of ${expandCodes} codes written over REST>&filter=<text>&count=20, ` +
    `${filters.length} filters in turn (word starts: ${filters.map((f) => `"${f}"`).join(", ")})`,
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: { maxMedianMs: 10, maxP99Ms: 50 }, postgres: { maxMedianMs: 10, maxP99Ms: 50 } },
  prepare: async (target) => {
    const valueSet = await writeTerminology(target)
    const paths = filters.map((filter) => `/fhir/ValueSet/$expand?url=${encodeURIComponent(valueSet)}&filter=${encodeURIComponent(filter)}&count=20`)
    for (const path of paths) {
      const response = await fetch(`${target.url}${path}`, { headers: { ...target.headers, accept: "application/fhir+json" } })
      const text = await response.text()
      const total = response.status === 200 ? (JSON.parse(text) as { expansion?: { total?: number } }).expansion?.total ?? 0 : 0
      if (total === 0) throw new Error(`GET ${path} answered ${response.status} with no code: ${text.slice(0, 300)}`)
    }
    return inTurn(paths)
  }
}

/** Codes checked by `$validate-code`, in turn: members with and without their display, a wrong display, and codes that are not members. */
const checks: ReadonlyArray<{ readonly code: string; readonly display?: string; readonly valid: boolean }> = [
  { code: "F0", valid: true },
  { code: "F117", display: findingDisplay(117), valid: true },
  { code: "F5999", valid: true },
  { code: "F11999", display: findingDisplay(11999), valid: true },
  { code: "F42", display: "Not its display", valid: true },
  { code: "F12000", valid: false },
  { code: "X1", valid: false },
  { code: "F7321", valid: true }
]

/** `$validate-code` of a code against the same ValueSet of 12,000 codes, codes in turn. */
export const validateCode: LoadWorkload = {
  name: "$validate-code",
  description: `GET /fhir/ValueSet/$validate-code?url=<the ValueSet of ${expandCodes} codes>&system=...&code=...[&display=...], ` +
    `${checks.length} codings in turn (members, a wrong display, non-members)`,
  connections: 8,
  onFloor: false,
  onSynthea: true,
  goals: { sqlite: { maxMedianMs: 10, maxP99Ms: 50 }, postgres: { maxMedianMs: 10, maxP99Ms: 50 } },
  prepare: async (target) => {
    const valueSet = await writeTerminology(target)
    const system = "http://terminology.bench.test/CodeSystem/findings"
    const paths = checks.map((check) =>
      `/fhir/ValueSet/$validate-code?url=${encodeURIComponent(valueSet)}&system=${encodeURIComponent(system)}&code=${check.code}` +
      (check.display === undefined ? "" : `&display=${encodeURIComponent(check.display)}`))
    for (const [index, path] of paths.entries()) {
      const response = await fetch(`${target.url}${path}`, { headers: { ...target.headers, accept: "application/fhir+json" } })
      const text = await response.text()
      const result = response.status === 200
        ? (JSON.parse(text) as { parameter?: ReadonlyArray<{ name: string; valueBoolean?: boolean }> }).parameter?.find((p) => p.name === "result")?.valueBoolean
        : undefined
      if (result !== checks[index]!.valid) throw new Error(`GET ${path} answered ${response.status}, result ${String(result)}: ${text.slice(0, 300)}`)
    }
    return inTurn(paths)
  }
}

/** The terminology workloads, in the order they run. */
export const terminologyWorkloads: ReadonlyArray<LoadWorkload> = [expandFiltered, validateCode]
