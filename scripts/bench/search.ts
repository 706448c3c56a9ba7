/**
 * Search workloads over the Synthea patients the ingest loaded: they run on the svc with the real
 * R4 packages, after the ingest, so the data is what the ingest left (every bundle loaded once per
 * ingest run and warm-up: a few copies of each patient, under different ids). Each workload checks
 * in `prepare` that its searches answer 200 with matches, then cycles through them.
 */
import type autocannon from "autocannon"
import { rotation } from "./rotation.ts"

const loinc = "http://loinc.org"
/** The commonest Observation codes of the Synthea patients: height, weight, BMI, blood pressure, pain severity. */
export const commonCodes = ["8302-2", "29463-7", "39156-5", "55284-4", "72514-3"]
/** The day from which the token + date search asks, well inside the data (2011 to 2021). */
export const dateFrom = "2016-01-01"

const accept = { accept: "application/fhir+json" }

/** The `total` of a `_summary=count` search (`path` from `/fhir/` on); fails unless 200. */
export const countOf = async (url: string, path: string): Promise<number> => {
  const response = await fetch(`${url}/fhir/${path}${path.includes("?") ? "&" : "?"}_summary=count`, { headers: accept })
  const text = await response.text()
  if (response.status !== 200) throw new Error(`GET /fhir/${path} answered ${response.status}: ${text.slice(0, 300)}`)
  return Number((JSON.parse(text) as { total?: number }).total ?? 0)
}

/** Fails unless each path answers 200 with at least one match: the workload would measure nothing. */
const checkMatches = async (url: string, paths: ReadonlyArray<string>): Promise<void> => {
  for (const path of paths) {
    if ((await countOf(url, path)) === 0) throw new Error(`GET /fhir/${path} matches nothing: was the Synthea ingest run first?`)
  }
}

/** An autocannon request cycling through `paths` (each from `/fhir/` on). */
const cycling = (paths: ReadonlyArray<string>): Array<autocannon.Request> => {
  const next = rotation(paths.length)
  return [{
    method: "GET",
    path: `/fhir/${paths[0]}`,
    headers: accept,
    setupRequest: (request) => ({ ...request, path: `/fhir/${paths[next()]}` })
  }]
}

const code = (value: string) => `code=${encodeURIComponent(`${loinc}|${value}`)}`

/** `Observation?code=http://loinc.org|<code>`, the common codes in turn; the first page of 20. */
export const tokenPaths = (): Array<string> => commonCodes.map((value) => `Observation?${code(value)}`)

/** The same codes from `dateFrom` on. */
export const tokenDatePaths = (): Array<string> => commonCodes.map((value) => `Observation?${code(value)}&date=ge${dateFrom}`)

/** `Patient?family=<the first three letters of a family name>`, over the family names loaded. */
export const familyPaths = async (url: string): Promise<Array<string>> => {
  const response = await fetch(`${url}/fhir/Patient?_count=1000&_elements=name`, { headers: accept })
  if (response.status !== 200) throw new Error(`GET /fhir/Patient answered ${response.status}`)
  const bundle = (await response.json()) as { entry?: ReadonlyArray<{ resource: { name?: ReadonlyArray<{ family?: string }> } }> }
  const prefixes = new Set<string>()
  for (const entry of bundle.entry ?? []) {
    for (const name of entry.resource.name ?? []) {
      if (name.family !== undefined && name.family.length >= 3) prefixes.add(name.family.slice(0, 3).toLowerCase())
    }
  }
  return [...prefixes].sort().map((prefix) => `Patient?family=${encodeURIComponent(prefix)}`)
}

/** The family names loaded (each once), in name order. */
const familyNames = async (url: string): Promise<Array<string>> => {
  const response = await fetch(`${url}/fhir/Patient?_count=1000&_elements=name`, { headers: accept })
  if (response.status !== 200) throw new Error(`GET /fhir/Patient answered ${response.status}`)
  const bundle = (await response.json()) as { entry?: ReadonlyArray<{ resource: { name?: ReadonlyArray<{ family?: string }> } }> }
  return [...new Set((bundle.entry ?? []).flatMap((entry) => (entry.resource.name ?? []).flatMap((name) => name.family ?? [])))].sort()
}

/** The ids of the patients loaded, by how many Observations they have, most first. */
export const patientsBySize = async (url: string): Promise<Array<string>> => {
  const response = await fetch(`${url}/fhir/Patient?_count=1000&_elements=id`, { headers: accept })
  if (response.status !== 200) throw new Error(`GET /fhir/Patient answered ${response.status}`)
  const bundle = (await response.json()) as { entry?: ReadonlyArray<{ resource: { id: string } }> }
  const ids = (bundle.entry ?? []).map((entry) => entry.resource.id)
  const sizes = new Map<string, number>()
  for (const id of ids) sizes.set(id, await countOf(url, `Observation?patient=${id}`))
  return ids.sort((a, b) => (sizes.get(b) ?? 0) - (sizes.get(a) ?? 0))
}

/** `Observation?patient.name=<family>`, over the family names loaded: a chain through the reference index. */
export const chainPaths = async (url: string): Promise<Array<string>> =>
  (await familyNames(url)).map((family) => `Observation?patient.name=${encodeURIComponent(family)}`)

/** `Patient?_has:Observation:patient:code=<code>`, the common codes in turn: a reverse chain. */
export const hasPaths = (): Array<string> => commonCodes.map((value) => `Patient?_has:Observation:patient:${code(value)}`)

/** One patient's Encounters with their patient and the Observations made in them, patients in turn. */
export const includePaths = async (url: string): Promise<Array<string>> =>
  (await patientsBySize(url)).slice(0, 20).map((id) =>
    `Encounter?patient=${id}&_include=Encounter:patient&_revinclude=Observation:encounter`)

/** `Patient/<id>/$everything` for the patient with the most Observations, first page. */
export const everythingPaths = async (url: string): Promise<Array<string>> => {
  const path = `Patient/${(await patientsBySize(url))[0]}/$everything`
  const response = await fetch(`${url}/fhir/${path}`, { headers: accept })
  if (response.status !== 200) throw new Error(`GET /fhir/${path} answered ${response.status}: ${(await response.text()).slice(0, 300)}`)
  return [path]
}

/** Every page of `Observation?status=final` by 100, in turn: offsets from the first page to the last. */
export const pagedPaths = async (url: string, pageSize = 100): Promise<Array<string>> => {
  const total = await countOf(url, "Observation?status=final")
  return Array.from({ length: Math.ceil(total / pageSize) }, (_, page) => `Observation?status=final&_count=${pageSize}&_offset=${page * pageSize}`)
}

/**
 * Every page of `Observation?_count=<pageSize>` reached from the first by its `next` links, in order (each
 * from `/fhir/` on): what a client paging to the end asks for, whatever the links hold.
 */
export const nextLinkPaths = async (url: string, pageSize = 100): Promise<Array<string>> => {
  const paths: Array<string> = []
  let next: string | undefined = `${url}/fhir/Observation?_count=${pageSize}`
  while (next !== undefined) {
    const path = next.slice(next.indexOf("/fhir/") + "/fhir/".length)
    const response = await fetch(`${url}/fhir/${path}`, { headers: accept })
    const text = await response.text()
    if (response.status !== 200) throw new Error(`GET /fhir/${path} answered ${response.status}: ${text.slice(0, 300)}`)
    paths.push(path)
    const bundle = JSON.parse(text) as { link?: ReadonlyArray<{ relation: string; url: string }> }
    next = bundle.link?.find((link) => link.relation === "next")?.url
  }
  return paths
}

/** The last `pages` pages of `Observation?_count=<pageSize>` by `_offset`: the deepest offsets there are. */
export const deepOffsetPaths = async (url: string, pages = 5, pageSize = 100): Promise<Array<string>> => {
  const last = Math.max(0, Math.ceil((await countOf(url, "Observation")) / pageSize) - 1)
  return Array.from({ length: Math.min(pages, last + 1) }, (_, n) => `Observation?_count=${pageSize}&_offset=${(last - n) * pageSize}`)
}

/** Readies one search workload: its paths, the first `checked` of them checked to match something. */
export const prepareSearch = async (url: string, paths: ReadonlyArray<string>, checked = paths.length): Promise<Array<autocannon.Request>> => {
  if (paths.length === 0) throw new Error("no search to run: was the Synthea ingest run first?")
  await checkMatches(url, paths.slice(0, checked))
  return cycling(paths)
}
