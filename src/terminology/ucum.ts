/**
 * UCUM units in base units, to compare quantities across units (https://hl7.org/fhir/R4/search.html#quantity,
 * "canonical units"). A small table, the fast path for the common clinical units, reads products and
 * quotients of known atoms with metric prefixes and integer exponents (`mg/dL`, `kg/m2`, `10*3/uL`,
 * `mm[Hg]`) and drops `{annotations}`; what it cannot read goes to `@lhncbc/ucum-lhc` (`ucumLhc.ts`), which
 * knows all of UCUM (`[stone_av]`, `[pt_us]`, `meq/L`, `mL/(kg.min)`). Base units are those of UCUM (g, m, s,
 * K, rad, C, cd) plus `mol` kept as its own dimension, so `mmol/L` reads `m-3.mol` rather than a count of
 * particles. Celsius and Fahrenheit are not ratio scales: they are returned as given; other non-ratio units
 * (`[pH]`) and arbitrary units other than `[iU]`/`[IU]` do not convert.
 */
import { readWithUcumLhc } from "./ucumLhc.ts"

type Dimension = "g" | "m" | "s" | "K" | "mol" | "rad" | "C" | "cd"
const order: ReadonlyArray<Dimension> = ["g", "m", "s", "K", "mol", "rad", "C", "cd"]
const isDimension = (name: string): name is Dimension => (order as ReadonlyArray<string>).includes(name)

interface Atom {
  readonly factor: number
  readonly dims: Partial<Record<Dimension, number>>
  readonly metric: boolean
}

const atom = (factor: number, dims: Partial<Record<Dimension, number>>, metric = false): Atom => ({ factor, dims, metric })
const pressure = { g: 1, m: -1, s: -2 }

const atoms: ReadonlyMap<string, Atom> = new Map([
  ["g", atom(1, { g: 1 }, true)],
  ["m", atom(1, { m: 1 }, true)],
  ["s", atom(1, { s: 1 }, true)],
  ["K", atom(1, { K: 1 }, true)],
  ["mol", atom(1, { mol: 1 }, true)],
  ["L", atom(0.001, { m: 3 }, true)],
  ["l", atom(0.001, { m: 3 }, true)],
  ["Pa", atom(1000, pressure, true)],
  ["bar", atom(1e8, pressure, true)],
  ["min", atom(60, { s: 1 })],
  ["h", atom(3600, { s: 1 })],
  ["d", atom(86_400, { s: 1 })],
  ["wk", atom(604_800, { s: 1 })],
  ["mo", atom(2_629_800, { s: 1 })],
  ["a", atom(31_557_600, { s: 1 })],
  ["[in_i]", atom(0.0254, { m: 1 })],
  ["[ft_i]", atom(0.3048, { m: 1 })],
  ["[yd_i]", atom(0.9144, { m: 1 })],
  ["[mi_i]", atom(1609.344, { m: 1 })],
  ["[lb_av]", atom(453.59237, { g: 1 })],
  ["[oz_av]", atom(28.349523125, { g: 1 })],
  ["mm[Hg]", atom(133_322.387415, pressure)],
  ["[iU]", atom(1, {})],
  ["[IU]", atom(1, {})],
  ["%", atom(0.01, {})],
  ["1", atom(1, {})]
])

const prefixes: ReadonlyMap<string, number> = new Map([
  ["k", 1e3], ["h", 1e2], ["da", 1e1], ["d", 1e-1], ["c", 1e-2], ["m", 1e-3], ["u", 1e-6], ["n", 1e-9], ["p", 1e-12],
  ["f", 1e-15], ["M", 1e6], ["G", 1e9]
])

const lookup = (name: string): Atom | undefined => {
  const exact = atoms.get(name)
  if (exact !== undefined) return exact
  for (const length of [1, 2]) {
    const prefix = prefixes.get(name.slice(0, length))
    const base = atoms.get(name.slice(length))
    if (prefix !== undefined && base?.metric === true) return atom(prefix * base.factor, base.dims)
  }
  return undefined
}

const term = /^(?:10\*(-?\d+)|10\^(-?\d+)|([^\d{}.\/-][^{}.\/]*?))?(-?\d+)?(\{[^}]*\})?$/

const parseTerm = (text: string): Atom | undefined => {
  const m = term.exec(text)
  if (m === null) return undefined
  const power = m[1] ?? m[2]
  const exponent = m[4] === undefined ? 1 : Number(m[4])
  let base: Atom | undefined
  if (power !== undefined) base = atom(10 ** Number(power), {})
  else if (m[3] !== undefined) base = lookup(m[3])
  else if (m[5] !== undefined || m[4] !== undefined) base = atom(1, {})
  if (base === undefined) return undefined
  if (m[3] === undefined && m[4] !== undefined && power === undefined) return atom(Number(m[4]), {})
  const dims: Partial<Record<Dimension, number>> = {}
  for (const d of order) {
    const e = base.dims[d]
    if (e !== undefined) dims[d] = e * exponent
  }
  return atom(base.factor ** exponent, dims)
}

export interface Canonical {
  readonly value: number
  readonly unit: string
}

const temperatures = new Set(["Cel", "[degF]"])

/** How a unit converts: a factor to its base units, or (Celsius, Fahrenheit) kept as given. */
interface Conversion {
  readonly factor: number | undefined
  readonly unit: string
}

/** The name of the base units, the same whichever reader found them: `g.m-3`, `s-1`, `1`. */
const named = (factor: number, dims: Partial<Record<Dimension, number>>): Conversion => {
  const name = order.filter((d) => (dims[d] ?? 0) !== 0).map((d) => (dims[d] === 1 ? d : `${d}${dims[d]}`)).join(".")
  return { factor, unit: name === "" ? "1" : name }
}

const fromTable = (unit: string): Conversion | undefined => {
  if (unit === "" || unit.includes("(")) return undefined
  let factor = 1
  const dims: Record<Dimension, number> = { g: 0, m: 0, s: 0, K: 0, mol: 0, rad: 0, C: 0, cd: 0 }
  const parts = unit.split(/(?=[./])/)
  for (const part of parts) {
    const divide = part.startsWith("/")
    const text = part.startsWith("/") || part.startsWith(".") ? part.slice(1) : part
    const parsed = parseTerm(text)
    if (parsed === undefined) return undefined
    factor = divide ? factor / parsed.factor : factor * parsed.factor
    for (const d of order) dims[d] += (divide ? -1 : 1) * (parsed.dims[d] ?? 0)
  }
  return named(factor, dims)
}

const fromLibrary = (unit: string): Conversion | undefined => {
  const read = readWithUcumLhc(unit)
  if (read === undefined) return undefined
  const dims: Partial<Record<Dimension, number>> = {}
  for (const [name, exponent] of Object.entries(read.dims)) {
    if (!isDimension(name)) return undefined
    dims[name] = exponent
  }
  return named(read.factor, dims)
}

const conversion = (unit: string): Conversion | undefined =>
  temperatures.has(unit) ? { factor: undefined, unit } : fromTable(unit) ?? fromLibrary(unit)

const convert = (value: number, c: Conversion | undefined): Canonical | undefined =>
  c === undefined ? undefined : c.factor === undefined ? { value, unit: c.unit } : { value: Number((value * c.factor).toPrecision(12)), unit: c.unit }

/** `value unit` in UCUM base units, or undefined when the unit is not UCUM or does not convert by a factor. */
export const toCanonical = (value: number, unit: string): Canonical | undefined => convert(value, conversion(unit))

/**
 * `toCanonical` that reads each unit once: a resource gives the same quantity to several parameters
 * (value-quantity and three composites of Observation). Remembers at most `limit` units.
 */
export const canonicalizer = (limit = 512): ((value: number, unit: string) => Canonical | undefined) => {
  const known = new Map<string, Conversion | null>()
  return (value, unit) => {
    let c = known.get(unit)
    if (c === undefined) {
      c = conversion(unit) ?? null
      if (known.size < limit) known.set(unit, c)
    }
    return convert(value, c ?? undefined)
  }
}
