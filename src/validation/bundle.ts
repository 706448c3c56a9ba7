/**
 * Bundle rules that R4 states in prose (https://hl7.org/fhir/R4/bundle.html), checked once per Bundle after
 * its entries have been walked:
 * - links: a relation of paging (`first`, `previous`, `next`, `last`) only in a searchset or history, and
 *   `self` and the paging relations at most once; a document's stylesheet link resolves in the Bundle;
 * - entries: `fullUrl` is absolute and present (except in transactions, batches and their responses), and a
 *   RESTful-looking fullUrl ends with the entry resource's type and id
 *   (https://hl7.org/fhir/R4/bundle.html#bundle-unique);
 * - references between entries (https://hl7.org/fhir/R4/bundle.html#references): a relative reference
 *   resolves against the fullUrl of the entry that holds it; the entry it names has the type the reference
 *   states and one the element allows; a reference several entries answer is ambiguous;
 * - documents and messages (https://hl7.org/fhir/R4/documents.html, https://hl7.org/fhir/R4/messaging.html):
 *   the references of the Composition (or MessageHeader.focus) resolve inside the Bundle, and every entry is
 *   reachable from the first one;
 * - searchsets (https://hl7.org/fhir/R4/bundle.html#searchset): a self link, search modes, entries with
 *   resources of the searched type, ids on matches and includes, OperationOutcome for outcomes.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import type { FoundReference } from "./referencePolicy.ts"
import type { Reporter } from "./Reporter.ts"
import { canonicalResourceTypes } from "./canonical.ts"
import { entryFragmentProblems } from "./references.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:/

/** A URL the way a RESTful server names a resource: `[base]/Type/id`, optionally `/_history/v`. */
const restful = /^(?:https?:\/\/(?:[A-Za-z0-9\\.:%$-]*\/)*?)?([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/

const isRestful = (url: string, catalog: Catalog): boolean => {
  const match = restful.exec(url)
  return match !== null && catalog.isResourceType(match[1]!)
}

const knownCanonical = (catalog: Catalog, url: string): boolean =>
  catalog.structureDefinition(url) !== undefined || catalog.valueSet(url) !== undefined || catalog.codeSystem(url) !== undefined ||
  catalog.searchParameterByUrl(url) !== undefined

interface Entry {
  readonly index: number
  readonly fullUrl: string | undefined
  readonly resource: Record<string, unknown> | undefined
  readonly type: string | undefined
  readonly id: string | undefined
  readonly versionId: string | undefined
}

const push = (map: Map<string, Array<Entry>>, key: string, entry: Entry): void => {
  const found = map.get(key)
  if (found === undefined) map.set(key, [entry])
  else found.push(entry)
}

/** The entries of a Bundle by fullUrl and by `Type/id`, each also with `/_history/` and its meta.versionId. */
class Index {
  readonly entries: ReadonlyArray<Entry>
  readonly byUrl = new Map<string, Array<Entry>>()
  readonly byTypeId = new Map<string, Array<Entry>>()

  constructor(bundle: Record<string, unknown>) {
    this.entries = list(bundle["entry"]).map((item, index) => {
      const entry = isObject(item) ? item : {}
      const resource = isObject(entry["resource"]) ? entry["resource"] : undefined
      const meta = resource?.["meta"]
      return {
        index,
        fullUrl: text(entry["fullUrl"]),
        resource,
        type: text(resource?.["resourceType"]),
        id: text(resource?.["id"]),
        versionId: isObject(meta) ? text(meta["versionId"]) : undefined
      }
    })
    for (const entry of this.entries) {
      if (entry.fullUrl !== undefined) {
        push(this.byUrl, entry.fullUrl, entry)
        if (entry.versionId !== undefined) push(this.byUrl, `${entry.fullUrl}/_history/${entry.versionId}`, entry)
      }
      if (entry.type !== undefined && entry.id !== undefined) {
        push(this.byTypeId, `${entry.type}/${entry.id}`, entry)
        if (entry.versionId !== undefined) push(this.byTypeId, `${entry.type}/${entry.id}/_history/${entry.versionId}`, entry)
      }
    }
  }
}

type Report = Reporter["report"]

/** The base of a fullUrl for relative references: `urn:uuid:` of a urn, all but `Type/id` of a URL. */
const baseOf = (fullUrl: string): string =>
  fullUrl.startsWith("urn") ? fullUrl.slice(0, fullUrl.lastIndexOf(":") + 1) : fullUrl.split("/").slice(0, -2).map((part) => `${part}/`).join("")

const slashes = (value: string): number => {
  let count = 0
  for (let i = value.indexOf("/"); i >= 0; i = value.indexOf("/", i + 1)) count++
  return count
}

const typeAllowed = (type: string, allowed: ReadonlyArray<string>): boolean =>
  allowed.length === 0 || allowed.includes(type) || allowed.includes("Resource")

/**
 * The entry a reference found in an entry's resource names, by the Bundle's resolution rules: an absolute
 * reference is a fullUrl; a relative one is read against the base of the fullUrl of the entry holding it.
 * Reports what is wrong with it on the way.
 */
const resolveFromEntry = (
  index: Index,
  bundleType: string | undefined,
  source: Entry,
  found: FoundReference,
  report: Report
): Entry | undefined => {
  let reference = found.reference
  const at = found.expression
  const hash = reference.indexOf("#")
  if (hash === 0) return undefined
  if (hash > 0) reference = reference.slice(0, hash)
  const responses = bundleType === "batch-response" || bundleType === "transaction-response"
  let target: string
  let version: string | undefined
  let statedType: string | undefined
  const history = reference.indexOf("/_history/")
  if (absolute.test(reference)) {
    target = history >= 0 ? reference.slice(0, history) : reference
    version = history >= 0 ? reference.slice(history + 10) : undefined
  } else if (source.fullUrl === undefined) {
    if (!responses) report("error", "required", at, `The relative reference '${reference}' cannot be resolved: the entry that holds it has no fullUrl`)
    return undefined
  } else if (slashes(reference) !== 1 && slashes(reference) !== 3) {
    const transaction = bundleType === "transaction" || bundleType === "batch"
    if (!(transaction && /^[A-Z][A-Za-z]+\?/.test(reference))) {
      report("error", "invalid", at, transaction
        ? `A relative reference must be [type]/[id] or a search ([type]?parameters), not '${reference}'`
        : `A relative reference must be [type]/[id], not '${reference}'`)
    }
    return undefined
  } else {
    const base = baseOf(source.fullUrl)
    const parts = reference.split("/")
    if (history >= 0) {
      version = reference.slice(history + 10)
      statedType = parts[0]
      target = `${base}${parts[0]}/${parts[1]}`
    } else if (base.startsWith("urn")) {
      statedType = parts[0]
      target = base + parts[1]
    } else {
      target = base + reference
    }
  }
  const candidates = index.byUrl.get(target) ?? []
  const matches = version === undefined ? candidates : candidates.filter((entry) => entry.versionId === version)
  if (version !== undefined) {
    for (const entry of candidates) {
      if (entry.versionId === undefined) {
        report("warning", "required", at, `The entries with the fullUrl ${target} should state meta.versionId: the reference '${found.reference}' names a version`)
        break
      }
    }
  }
  if (matches.length > 1 && bundleType !== "history") {
    report("error", "invalid", at, `Multiple matches in the Bundle for the reference ${found.reference}`)
    return undefined
  }
  const match = matches[0]
  if (match === undefined) {
    if (reference.startsWith("urn:")) report("warning", "not-found", at, `The urn reference ${reference} is not the fullUrl of any entry in the Bundle`)
    else if (!absolute.test(reference)) possibleMatches(index, reference, target, at, report)
    return undefined
  }
  if (statedType !== undefined && match.type !== undefined && match.type !== statedType) {
    report("error", "invalid", at, `The reference ${found.reference} names the type ${statedType}, but the entry it matches in the Bundle is a resource of type ${match.type}`)
  } else if (match.type !== undefined && !typeAllowed(match.type, found.targetTypes)) {
    report("error", "invalid", at, `The reference ${found.reference} resolves in the Bundle to a ${match.type}, but only ${found.targetTypes.join(", ")} is allowed here`)
  }
  return match
}

/** Warnings for a relative reference that matches no fullUrl but names the type and id of entries. */
const possibleMatches = (index: Index, reference: string, target: string, at: string, report: Report): void => {
  const parts = reference.split("/")
  const same = index.byTypeId.get(`${parts[0]}/${parts[1]}`) ?? []
  if (same.length > 1) {
    report("warning", "not-found", at, `No entry matches ${target} by the Bundle's rules for relative references, but ${same.length} entries have the type and id of ${reference}`)
  }
  for (const entry of same) {
    report("warning", "not-found", at, entry.fullUrl === undefined
      ? `Entry ${entry.index} has the type and id of ${reference}, but no fullUrl, so it does not match ${target}`
      : `Entry ${entry.index} has the type and id of ${reference}, but its fullUrl ${entry.fullUrl} is not ${target}`)
  }
}

/**
 * The entry a reference of a document's Composition (or a message's MessageHeader) names: it must be in
 * the Bundle. An absolute reference to a conformance resource the server holds, or to a canonical resource
 * type, may point outside it. `severity` undefined: only the target is wanted.
 */
const resolveInDocument = (
  index: Index,
  catalog: Catalog,
  source: Entry,
  reference: string,
  at: string,
  name: string,
  report: Report | undefined
): Entry | undefined => {
  const hash = reference.indexOf("#")
  if (hash === 0) return undefined
  const ref = hash > 0 ? reference.slice(0, hash) : reference
  if (absolute.test(ref)) {
    const found = index.byUrl.get(ref) ?? []
    if (found.length === 1) return found[0]
    if (found.length > 1) {
      report?.("error", "invalid", at, `Found ${found.length} matches for '${ref}' in the Bundle (${name})`)
      return undefined
    }
    const outside = knownCanonical(catalog, ref) || (isRestful(ref, catalog) && canonicalResourceTypes.has(restful.exec(ref)![1]!))
    if (!outside) report?.("error", "not-found", at, `Can't find '${ref}' in the Bundle (${name})`)
    return undefined
  }
  let target: string | undefined
  if (source.fullUrl !== undefined && source.type !== undefined && source.id !== undefined && isRestful(source.fullUrl, catalog) &&
    source.fullUrl.endsWith(`${source.type}/${source.id}`)) {
    target = source.fullUrl.slice(0, source.fullUrl.length - `${source.type}/${source.id}`.length) + ref
  }
  const found = target === undefined ? [] : index.byUrl.get(target) ?? []
  if (found.length === 1) return found[0]
  if (found.length > 1) {
    report?.("error", "invalid", at, `Found ${found.length} matches for '${ref}' in the Bundle (${name})`)
    return undefined
  }
  const parts = ref.split("/")
  if (parts.length >= 2 && catalog.isResourceType(parts[0]!)) {
    const same = index.byTypeId.get(parts.length >= 4 ? ref : `${parts[0]}/${parts[1]}`)
    if (same !== undefined) {
      const urls = [...new Set(same.map((entry) => entry.fullUrl ?? "<missing>"))].sort().join(", ")
      report?.("error", "not-found", at, target === undefined
        ? `Can't find '${ref}' in the Bundle (${name}): an entry has this type and id (${urls}), but a relative reference resolves against the fullUrl of the entry that holds it, and '${source.fullUrl ?? "(none)"}' is not a RESTful [base]/${source.type ?? "Type"}/${source.id ?? "id"}`
        : `Can't find '${ref}' in the Bundle (${name}): an entry has this type and id, but a relative reference resolves against the fullUrl of the entry that holds it, to '${target}', and the entries found have ${urls}`)
      return undefined
    }
  }
  report?.("error", "not-found", at, `Can't find '${ref}' in the Bundle (${name})`)
  return undefined
}

const pagingRelations = ["first", "previous", "next", "last"]

const links = (bundle: Record<string, unknown>, type: string | undefined, index: Index, path: string, reporter: Reporter): void => {
  const seen = new Set<string>()
  list(bundle["link"]).forEach((link, i) => {
    if (!isObject(link)) return
    const relation = text(link["relation"])
    if (relation === undefined) return
    const at = `${path}.link[${i}]`
    const paged = type === "searchset" || type === "history"
    if (!paged && type !== undefined && pagingRelations.includes(relation)) {
      reporter.report("error", "invalid", `${at}.relation`, `The link relation '${relation}' is for search results and history: it is not allowed in a ${type} Bundle`)
    }
    if (relation === "self" || (paged && pagingRelations.includes(relation))) {
      if (seen.has(relation)) reporter.report("error", "invalid", at, `The link relation '${relation}' may occur only once`)
      seen.add(relation)
    }
    const url = text(link["url"])
    if (type === "document" && relation === "stylesheet" && url !== undefined) {
      if (!absolute.test(url)) {
        if (!index.entries.some((entry) => entry.type !== undefined && `${entry.type}/${entry.id}` === url)) {
          reporter.report("error", "not-found", `${at}.url`, `The stylesheet '${url}' is not a resource in this Bundle`)
        }
      } else if (url !== "https://hl7.org/fhir/fhir.css") {
        reporter.report("warning", "business-rule", `${at}.url`, "A document should not use a stylesheet from elsewhere than https://hl7.org/fhir/fhir.css")
        if (url.startsWith("http://")) reporter.report("warning", "business-rule", `${at}.url`, "The stylesheet is not fetched securely (http rather than https)")
        if (!/^(https?|ftp):/.test(url)) reporter.report("warning", "business-rule", `${at}.url`, `The stylesheet '${url}' is not a link a browser can follow`)
      }
    }
  })
}

const entries = (index: Index, type: string | undefined, path: string, reporter: Reporter): void => {
  const catalog = reporter.registry.catalog
  const fullUrlOptional = type === "transaction" || type === "batch" || type === "transaction-response" || type === "batch-response"
  for (const entry of index.entries) {
    const at = `${path}.entry[${entry.index}]`
    const fullUrl = entry.fullUrl
    if (fullUrl === undefined) {
      if (!fullUrlOptional && type !== undefined) {
        reporter.report("error", "invalid", at, "Except in transactions and batches (and their responses), each entry of a Bundle must have a fullUrl: the identity of its resource")
      }
      continue
    }
    if (!absolute.test(fullUrl)) {
      reporter.report("error", "value", `${at}.fullUrl`, `The fullUrl must be an absolute URL (not '${fullUrl}')`)
      continue
    }
    if (entry.type !== undefined && catalog.isResourceType(entry.type) && isRestful(fullUrl, catalog)) {
      if (entry.id === undefined) {
        reporter.report("error", "invalid", at, `The fullUrl '${fullUrl}' looks like a RESTful server URL, but the resource has no id`)
      } else if (!fullUrl.endsWith(`/${entry.type}/${entry.id}`)) {
        reporter.report("error", "invalid", at, `The fullUrl '${fullUrl}' looks like a RESTful server URL, so it must end with the resource's type and id (/${entry.type}/${entry.id})`)
      }
    }
    const url = text(entry.resource?.["url"])
    if (url !== undefined && url === fullUrl && !(isRestful(url, catalog) && entry.id !== undefined && url.endsWith(`/${entry.id}`)) &&
      !url.startsWith("http://hl7.org/fhir/v3/") && !url.startsWith("http://hl7.org/fhir/v2/")) {
      reporter.report("error", "invalid", at, `The canonical URL (${url}) can only be the fullUrl when it ends with the resource's id (${entry.id ?? "none"})`)
    }
  }
}

/** The entry index of a reference found inside entry `n`'s resource (`{path}.entry[n].resource...`). */
const entryOf = (expression: string, prefix: string): number | undefined => {
  if (!expression.startsWith(prefix)) return undefined
  const close = expression.indexOf("]", prefix.length)
  if (close < 0 || !expression.startsWith("].resource", close)) return undefined
  const n = Number(expression.slice(prefix.length, close))
  return Number.isInteger(n) ? n : undefined
}

/** The references the walk found in each entry's resource, leaving out those of Bundles nested in it. */
const referencesByEntry = (index: Index, path: string, references: ReadonlyArray<FoundReference>): Map<number, Array<FoundReference>> => {
  const byEntry = new Map<number, Array<FoundReference>>()
  const prefix = `${path}.entry[`
  for (const found of references) {
    const n = entryOf(found.expression, prefix)
    if (n === undefined || index.entries[n]?.type === "Bundle") continue
    const known = byEntry.get(n)
    if (known === undefined) byEntry.set(n, [found])
    else known.push(found)
  }
  return byEntry
}

/** The references of a document's Composition that must resolve in the Bundle, with their names. */
const compositionReferences = (composition: Record<string, unknown>, path: string): Array<{ reference: string; at: string; name: string }> => {
  const out: Array<{ reference: string; at: string; name: string }> = []
  const add = (value: unknown, at: string, name: string): void => {
    if (isObject(value) && typeof value["reference"] === "string") out.push({ reference: value["reference"], at, name })
  }
  const each = (owner: Record<string, unknown>, key: string, at: string, name: string): void => {
    const value = owner[key]
    if (Array.isArray(value)) value.forEach((item, i) => add(item, `${at}.${key}[${i}]`, `${name}.${key}`))
    else add(value, `${at}.${key}`, `${name}.${key}`)
  }
  for (const key of ["subject", "author", "encounter", "custodian"]) each(composition, key, path, "Composition")
  list(composition["attester"]).forEach((attester, i) => {
    if (isObject(attester)) each(attester, "party", `${path}.attester[${i}]`, "Composition.attester")
  })
  list(composition["event"]).forEach((event, i) => {
    if (isObject(event)) each(event, "detail", `${path}.event[${i}]`, "Composition.event")
  })
  const sections = (owner: Record<string, unknown>, at: string, depth: number): void => {
    if (depth > 32) return
    list(owner["section"]).forEach((section, i) => {
      if (!isObject(section)) return
      const here = `${at}.section[${i}]`
      each(section, "author", here, "Section")
      each(section, "focus", here, "Section")
      each(section, "entry", here, "Section")
      sections(section, here, depth + 1)
    })
  }
  sections(composition, path, 0)
  return out
}

/** Every string in a value (candidate links between entries: references, urls, uris). */
const strings = (value: unknown, out: Set<string>, depth: number): void => {
  if (depth > 64) return
  if (typeof value === "string") {
    if (value.length < 4096) out.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) strings(item, out, depth + 1)
  } else if (isObject(value)) {
    for (const key in value) {
      if (key === "div" || key === "data") continue
      const child = value[key]
      // A Bundle inside an entry has its own links.
      if (isObject(child) && child["resourceType"] === "Bundle") continue
      strings(child, out, depth + 1)
    }
  }
}

/**
 * Every entry of a document (message) is reachable from the first by following references, forwards or, for
 * a Provenance, backwards (https://hl7.org/fhir/R4/documents.html#content). An entry that is not: an error
 * in a document, a warning in a message.
 */
const interlinked = (bundle: Record<string, unknown>, index: Index, message: boolean, path: string, reporter: Reporter): void => {
  const catalog = reporter.registry.catalog
  const withResource = index.entries.filter((entry) => entry.resource !== undefined)
  if (withResource.length === 0) return
  const targets = new Map<Entry, Set<Entry>>()
  for (const entry of withResource) {
    const found = new Set<string>()
    strings(entry.resource, found, 0)
    const linked = new Set<Entry>()
    for (const value of found) {
      if (value.startsWith("#") || (!absolute.test(value) && !/^[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]/.test(value))) continue
      const target = resolveInDocument(index, catalog, entry, value, "", "", undefined)
      if (target !== undefined && target !== entry) linked.add(target)
    }
    targets.set(entry, linked)
  }
  const visited = new Set<Entry>()
  const visit = (entry: Entry): void => {
    const stack = [entry]
    while (stack.length > 0) {
      const next = stack.pop()!
      if (visited.has(next)) continue
      visited.add(next)
      for (const target of targets.get(next) ?? []) if (!visited.has(target)) stack.push(target)
    }
  }
  visit(withResource[0]!)
  for (const link of list(bundle["link"])) {
    if (!isObject(link) || link["relation"] !== "stylesheet" || typeof link["url"] !== "string") continue
    const entry = withResource.find((e) => `${e.type}/${e.id}` === link["url"])
    if (entry !== undefined) visited.add(entry)
  }
  for (let changed = true; changed;) {
    changed = false
    for (const entry of withResource) {
      if (visited.has(entry) || ![...targets.get(entry)!].some((target) => visited.has(target))) continue
      if (entry.type !== "Provenance") {
        reporter.report(message ? "information" : "warning", "informational", `${path}.entry[${entry.index}]`, message
          ? `Entry ${entry.fullUrl ?? entry.index} is reached from the MessageHeader only by following a reference backwards: check that the message needs it`
          : `Entry ${entry.fullUrl ?? entry.index} is reached from the Composition only by following a reference backwards; in R4 only a Provenance may be linked that way`)
      }
      visit(entry)
      changed = true
    }
  }
  for (const entry of withResource) {
    if (visited.has(entry)) continue
    reporter.report(message ? "warning" : "error", "informational", `${path}.entry[${entry.index}]`, message
      ? `Entry ${entry.fullUrl ?? entry.index} cannot be reached by following references from the MessageHeader: check that the message needs it`
      : `Entry ${entry.fullUrl ?? entry.index} cannot be reached by following references (forwards or backwards) from the Composition`)
  }
}

const documentOrMessage = (bundle: Record<string, unknown>, index: Index, type: string, path: string, reporter: Reporter): void => {
  const first = index.entries[0]
  // An empty document or message, and a first entry of the wrong type, are bdl-11 and bdl-12.
  if (first === undefined) return
  if (first.resource === undefined) {
    reporter.report("error", "invalid", `${path}.entry[0]`, `The first entry of a ${type} must have a resource`)
    return
  }
  const at = `${path}.entry[0].resource`
  const catalog = reporter.registry.catalog
  if (type === "document" && first.type === "Composition") {
    for (const { reference, at: where, name } of compositionReferences(first.resource, at)) {
      resolveInDocument(index, catalog, first, reference, where, name, reporter.report)
    }
  }
  if (type === "message" && first.type === "MessageHeader") {
    list(first.resource["focus"]).forEach((focus, i) => {
      if (isObject(focus) && typeof focus["reference"] === "string") {
        resolveInDocument(index, catalog, first, focus["reference"], `${at}.focus[${i}]`, "MessageHeader.focus", reporter.report)
      }
    })
  }
  if ((type === "document" && first.type === "Composition") || (type === "message" && first.type === "MessageHeader")) {
    interlinked(bundle, index, type === "message", path, reporter)
    for (const problem of entryFragmentProblems(index.entries, path)) reporter.report(problem.severity, problem.code, problem.expression, problem.diagnostics)
  }
}

/** The resource types a search's self link asks for: its path's last segment, or its `_type` parameter. */
const searchedTypes = (url: string, catalog: Catalog): ReadonlyArray<string> => {
  const query = url.indexOf("?")
  const head = (query >= 0 ? url.slice(0, query) : url).split("/")
  const last = head[head.length - 1] ?? ""
  if (catalog.isResourceType(last)) return [last]
  if (query < 0) return []
  const types: Array<string> = []
  for (const parameter of url.slice(query + 1).split("&")) {
    if (parameter.startsWith("_type=")) types.push(...parameter.slice(6).split(","))
  }
  return types
}

const searchset = (bundle: Record<string, unknown>, index: Index, path: string, reporter: Reporter): void => {
  const catalog = reporter.registry.catalog
  const self = list(bundle["link"]).find((link) => isObject(link) && link["relation"] === "self")
  const selfUrl = isObject(self) ? text(self["url"]) : undefined
  if (self === undefined) reporter.report("warning", "invalid", path, "A searchset Bundle should have a self link that states the search")
  const types = selfUrl === undefined ? [] : searchedTypes(selfUrl, catalog)
  const raw = list(bundle["entry"])
  const modeOf = (i: number): string | undefined => {
    const entry = raw[i]
    const search = isObject(entry) ? entry["search"] : undefined
    return isObject(search) ? text(search["mode"]) : undefined
  }
  const anyMode = index.entries.some((entry) => modeOf(entry.index) !== undefined)
  let typeProblem = false
  let firstType: string | undefined
  for (const entry of index.entries) {
    const at = `${path}.entry[${entry.index}]`
    const mode = modeOf(entry.index)
    if (anyMode && mode === undefined) reporter.report("warning", "invalid", at, "The entries of a searchset Bundle should state their search mode")
    if (entry.resource === undefined) {
      reporter.report("error", "invalid", at, "The entries of a searchset Bundle must have resources")
      continue
    }
    const type = entry.type ?? ""
    if (mode === "match") {
      if (entry.id === undefined) reporter.report("error", "required", `${at}.resource`, "Search results must have ids")
      if (types.length > 0 && !types.includes(type)) {
        reporter.report("error", "invalid", `${at}.resource`, `A ${type} is not a match for the search ${selfUrl} (it asks for ${types.join(", ")})`)
      }
    } else if (mode === "include") {
      if (entry.id === undefined) reporter.report("error", "required", `${at}.resource`, "Search results must have ids")
    } else if (mode !== undefined) {
      if (type !== "OperationOutcome") reporter.report("error", "invalid", `${at}.resource`, `An entry with search mode '${mode}' is an OperationOutcome, not a ${type}`)
    } else if (!anyMode) {
      if (types.length > 0 && !types.includes(type) && type !== "OperationOutcome") {
        typeProblem = true
        reporter.report("warning", "invalid", at, `A ${type} is not a match for the search ${selfUrl} (it asks for ${types.join(", ")}): is a search mode missing?`)
        continue
      }
      if (type !== "OperationOutcome") {
        if (entry.id === undefined) reporter.report("warning", "required", `${at}.resource`, "Search results should have ids")
        if (firstType !== undefined && firstType !== type) typeProblem = true
        firstType ??= type
      }
    }
  }
  if (!anyMode && typeProblem) reporter.report("warning", "invalid", path, "The entries of a searchset Bundle should state their search mode")
}

/** References between the entries: resolution, stated and allowed types, ambiguity. */
const entryReferences = (index: Index, type: string | undefined, path: string, reporter: Reporter): void => {
  const byEntry = referencesByEntry(index, path, reporter.references)
  const responses = type === "batch-response" || type === "transaction-response"
  for (const [n, found] of byEntry) {
    const source = index.entries[n]
    if (source === undefined) continue
    const outside = found.filter((f) => !f.reference.startsWith("#"))
    if (outside.length === 0) continue
    if (source.fullUrl === undefined && !responses && type !== undefined) {
      reporter.report("error", "required", `${path}.entry[${n}]`, "Bundle entry missing fullUrl: the references of its resource cannot be resolved")
    }
    for (const reference of outside) {
      const target = resolveFromEntry(index, type, source, reference, reporter.report)
      if (reference.aggregation !== undefined || reference.targetProfiles !== undefined) {
        reporter.referenceTarget?.(reference, target?.resource, target === undefined ? "elsewhere" : "bundled")
      }
    }
  }
}

export const bundle = (value: Json, path: string, walk: Reporter): void => {
  // `report` is a method: keep its receiver when it is passed on alone.
  const reporter: Reporter = {
    registry: walk.registry,
    references: walk.references,
    report: (s, c, e, d) => walk.report(s, c, e, d),
    referenceTarget: (found, target, destination) => walk.referenceTarget?.(found, target, destination)
  }
  const type = text(value["type"])
  const index = new Index(value)
  links(value, type, index, path, reporter)
  entries(index, type, path, reporter)
  entryReferences(index, type, path, reporter)
  if (type === "document" || type === "message") documentOrMessage(value, index, type, path, reporter)
  else if (type === "searchset") searchset(value, index, path, reporter)
}
