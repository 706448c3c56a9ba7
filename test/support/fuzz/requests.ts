/**
 * Generated hostile requests: malformed bodies, parameters, headers, paths, Bundles and patches, each a
 * mutation of something a client might send. A request is plain data, so a failing one can be printed and replayed.
 */
import { deepJson, fieldNames, jsonValue, nastyString, percent, type Random } from "./random.ts"

export interface FuzzRequest {
  readonly kind: string
  readonly method: string
  /** Path and query after the server's base URL, e.g. `/fhir/Patient?name=x`. */
  readonly path: string
  readonly headers: Record<string, string>
  readonly body?: string
  /** Bytes written as they are on a raw socket, for what an HTTP client library refuses to send. */
  readonly raw?: string
}

/** Resources that exist before fuzzing starts, so reads, updates and patches reach real data. */
export const seeds = {
  probe: { resourceType: "Patient", id: "fuzz-probe", name: [{ family: "Probe" }] },
  patient: { resourceType: "Patient", id: "fuzz-p1", active: true, name: [{ family: "Fuzz", given: ["Ann"] }], birthDate: "1970-01-01", gender: "female" },
  observation: {
    resourceType: "Observation",
    id: "fuzz-o1",
    status: "final",
    code: { coding: [{ system: "http://loinc.org", code: "8867-4" }] },
    subject: { reference: "Patient/fuzz-p1" },
    valueQuantity: { value: 72, unit: "/min", system: "http://unitsofmeasure.org", code: "/min" }
  }
} as const

const types = ["Patient", "Observation", "Encounter", "Bundle", "Condition", "ValueSet", "NotAType", "patient", ""]
const searchNames = [
  "name", "family", "given", "birthdate", "gender", "identifier", "_id", "_lastUpdated", "_text", "_content", "_tag",
  "subject", "patient", "code", "value-quantity", "date", "status", "combo-code-value-quantity", "url", "_count",
  "_offset", "_sort", "_include", "_revinclude", "_has:Observation:patient:code", "_summary", "_elements", "_total",
  "_filter", "_cursor", "_format", "_pretty", "subject:Patient.name", "general-practitioner.name", "_list", "_type",
  "bogus", "name:exact", "name:contains", "name:missing", "code:text", "code:not", "code:in", "code:above",
  "code:of-type", "subject:identifier", "birthdate:missing", "_id:not", "_source", "_security", "_profile"
]
const prefixes = ["", "eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap", "zz"]
const values = [
  "", "x", "Fuzz", "1970", "1970-01-01", "1970-13-01", "2020-02-30T25:00", "9999-12-31T23:59:59.999+14:00", "0", "-1",
  "1e400", "9223372036854775808", "99999999999999999999", "NaN", "Infinity", "-0.0000000000000000001", "72|http://unitsofmeasure.org|/min",
  "http://loinc.org|8867-4", "|", "||", "a|b|c|d", "Patient/fuzz-p1", "Patient/", "fuzz-p1,fuzz-p2", "true", "false",
  "name eq Fuzz", "name eq", "(((", "name eq \"x\" and (", "Patient:subject", "Observation:subject:Patient", "*",
  "Patient:nonsense", "-_lastUpdated", "name,-birthdate", "count", "data", "true,false", "%", "%00", "%ZZ", "%ED%A0%80"
]

const searchValue = (rnd: Random): string => {
  if (rnd.chance(0.25)) return percent(nastyString(rnd, 40))
  if (rnd.chance(0.05)) return "x".repeat(rnd.int(1000, 20_000))
  if (rnd.chance(0.05)) return Array.from({ length: rnd.int(2, 3000) }, () => rnd.pick(values)).join(",")
  const value = rnd.pick(values)
  return `${rnd.pick(prefixes)}${value.startsWith("%") ? value : encodeURIComponent(value)}`
}

const query = (rnd: Random): string => {
  const count = rnd.chance(0.03) ? rnd.int(100, 1500) : rnd.int(0, 5)
  const parts: Array<string> = []
  for (let i = 0; i < count; i++) {
    const name = rnd.chance(0.1) ? percent(nastyString(rnd, 12)) : rnd.pick(searchNames)
    parts.push(`${name}=${searchValue(rnd)}`)
  }
  return parts.join("&")
}

const json = { "content-type": "application/fhir+json" }

/** A resource body: valid, mutated, truncated, or not JSON at all. */
const resourceBody = (rnd: Random, type: string): string => {
  const base: Record<string, unknown> = { ...(rnd.chance(0.5) ? seeds.patient : seeds.observation) }
  base["resourceType"] = rnd.chance(0.8) ? type : rnd.pick(types)
  delete base["id"]
  switch (rnd.int(0, 9)) {
    case 0: return JSON.stringify(base).slice(0, rnd.int(0, 60))
    case 1: return deepJson(rnd, rnd.int(100, 20_000))
    case 2: {
      const field = rnd.pick(fieldNames)
      return JSON.stringify({ ...base, [field]: jsonValue(rnd, 4) })
    }
    case 3: return JSON.stringify({ ...base, name: [{ family: nastyString(rnd, 60), given: [nastyString(rnd)] }] })
    case 4: return JSON.stringify({ ...base, [nastyString(rnd, 10)]: jsonValue(rnd) })
    case 5: return rnd.pick(["", "null", "[]", "{}", "\"Patient\"", "1", "{\"resourceType\":", "\u0000", "\ufeff{}", "{\"resourceType\":\"Patient\",\"resourceType\":\"Observation\"}"])
    case 6: return JSON.stringify({ ...base, text: { status: "generated", div: rnd.pick(["<div>x</div>", "<div xmlns=\"http://www.w3.org/1999/xhtml\"><script>x</script></div>", "<p>", nastyString(rnd)]) } })
    case 7: return JSON.stringify({ ...base, contained: [{ ...base, id: nastyString(rnd, 8), contained: [base] }] })
    case 8: return JSON.stringify({ ...base, extension: [{ url: nastyString(rnd), valueString: nastyString(rnd), extension: [{ url: "x" }] }] })
    default: return JSON.stringify(base)
  }
}

const xmlBodies = [
  "<Patient xmlns=\"http://hl7.org/fhir\"><active value=\"true\"/></Patient>",
  "<Patient xmlns=\"http://hl7.org/fhir\"><active value=\"true\">",
  "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]><Patient xmlns=\"http://hl7.org/fhir\"><gender value=\"&b;\"/></Patient>",
  "<Patient xmlns=\"http://hl7.org/fhir\"><birthDate value=\"1970-01-01\" value=\"1971-01-01\"/></Patient>",
  "<Patient><active value=\"true\"/></Patient>",
  "<Patient xmlns=\"http://hl7.org/fhir\"><name><family value=\"&#0;\"/></name></Patient>",
  "<Patient xmlns=\"http://hl7.org/fhir\"><text><status value=\"generated\"/><div xmlns=\"http://www.w3.org/1999/xhtml\"><p>a</p></div></text></Patient>",
  "<Patient xmlns=\"http://hl7.org/fhir\"><unknown value=\"1\"/></Patient>",
  "not xml at all"
]

const xmlBody = (rnd: Random): string => {
  if (rnd.chance(0.2)) {
    const depth = rnd.int(100, 20_000)
    return `<Patient xmlns="http://hl7.org/fhir">${"<extension url=\"x\">".repeat(depth)}${"</extension>".repeat(depth)}</Patient>`
  }
  const text = rnd.pick(xmlBodies)
  return rnd.chance(0.2) ? text.slice(0, rnd.int(0, text.length)) : text
}

const patchBody = (rnd: Random): { body: string; contentType: string } => {
  if (rnd.chance(0.5)) {
    const ops = ["add", "remove", "replace", "move", "copy", "test", "bogus"]
    const paths = ["/active", "/name/0/family", "/name/-", "/name/99", "/id", "/meta", "", "/", "/~2", "/name/0/given/0", "/resourceType"]
    const count = rnd.chance(0.05) ? rnd.int(1000, 20_000) : rnd.int(0, 4)
    const operations = Array.from({ length: count }, () => ({ op: rnd.pick(ops), path: rnd.pick(paths), from: rnd.pick(paths), value: jsonValue(rnd) }))
    const text = rnd.chance(0.1) ? deepJson(rnd, rnd.int(100, 20_000)) : JSON.stringify(rnd.chance(0.1) ? operations[0] ?? {} : operations)
    return { body: text, contentType: "application/json-patch+json" }
  }
  const part = () => ({
    name: "operation",
    part: [
      { name: "type", valueCode: rnd.pick(["add", "insert", "delete", "replace", "move", "bogus"]) },
      { name: "path", valueString: rnd.pick(["Patient", "Patient.name", "Patient.name[0]", "Patient.name.where(", "Patient.active", nastyString(rnd)]) },
      { name: "name", valueString: rnd.pick(["given", "active", "family", ""]) },
      { name: "value", ...(rnd.chance(0.5) ? { valueString: nastyString(rnd) } : { valueBoolean: true }) },
      { name: "index", valueInteger: rnd.pick([0, 1, -1, 99999999]) }
    ].filter(() => rnd.chance(0.8))
  })
  const count = rnd.chance(0.05) ? rnd.int(1000, 10_000) : rnd.int(0, 4)
  const parameters = { resourceType: "Parameters", parameter: Array.from({ length: count }, part) }
  const text = rnd.chance(0.1)
    ? `{"resourceType":"Parameters","parameter":[{"name":"operation","part":${deepJson(rnd, rnd.int(100, 20_000))}}]}`
    : JSON.stringify(parameters)
  return { body: text, contentType: "application/fhir+json" }
}

const bundleBody = (rnd: Random): string => {
  if (rnd.chance(0.05)) return `{"resourceType":"Bundle","type":"transaction","entry":[{"resource":${deepJson(rnd, rnd.int(100, 20_000))}}]}`
  const methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "bogus", ""]
  const urls = ["Patient", "Patient/fuzz-p1", "Patient/new", "Patient?name=Fuzz", "Patient/$validate", "$everything", "Patient/fuzz-p1/_history/1", "../x", "http://other/Patient/1", "urn:uuid:1", "metadata", "", "Patient?_count=1&_offset=9223372036854775806"]
  const count = rnd.chance(0.03) ? rnd.int(500, 5000) : rnd.int(0, 6)
  const entries = Array.from({ length: count }, () => {
    const method = rnd.pick(methods)
    const entry: Record<string, unknown> = {
      fullUrl: rnd.pick(["urn:uuid:11111111-1111-1111-1111-111111111111", "urn:uuid:x", "Patient/1", nastyString(rnd)]),
      request: { method, url: rnd.pick(urls), ...(rnd.chance(0.2) ? { ifMatch: rnd.pick(["W/\"1\"", "x", ""]) } : {}), ...(rnd.chance(0.2) ? { ifNoneExist: searchValue(rnd) } : {}) }
    }
    if (rnd.chance(0.7)) entry["resource"] = JSON.parse(rnd.chance(0.8) ? JSON.stringify({ ...seeds.patient, id: undefined, managingOrganization: { reference: rnd.pick(["urn:uuid:11111111-1111-1111-1111-111111111111", "Organization/none", "#x", "urn:uuid:x"]) } }) : JSON.stringify(jsonValue(rnd)))
    if (rnd.chance(0.05)) return jsonValue(rnd)
    if (rnd.chance(0.05)) delete entry["request"]
    return entry
  })
  const bundle: Record<string, unknown> = { resourceType: rnd.chance(0.95) ? "Bundle" : "Patient", type: rnd.pick(["transaction", "batch", "collection", "searchset", "bogus"]), entry: entries }
  return JSON.stringify(bundle)
}

const headerValues = (rnd: Random): Record<string, string> => {
  const headers: Record<string, string> = {}
  if (rnd.chance(0.3)) headers["accept"] = rnd.pick(["application/fhir+xml", "application/xml", "text/html", "*/*", "application/fhir+json;q=0", "x", "application/json, application/fhir+xml"])
  if (rnd.chance(0.2)) headers["if-match"] = rnd.pick(["W/\"1\"", "W/\"99999999999999999999\"", "\"1\"", "*", "W/", "x"])
  if (rnd.chance(0.1)) headers["if-none-match"] = rnd.pick(["W/\"1\"", "*", "x"])
  if (rnd.chance(0.1)) headers["if-modified-since"] = rnd.pick(["Thu, 01 Jan 1970 00:00:00 GMT", "yesterday", "", "Mon, 99 Foo 20000 99:99:99 GMT"])
  if (rnd.chance(0.2)) headers["if-none-exist"] = query(rnd)
  if (rnd.chance(0.2)) headers["prefer"] = rnd.pick(["return=representation", "return=minimal", "return=OperationOutcome", "handling=strict", "handling=lenient", "respond-async", "return=", "x=y=z"])
  return headers
}

/** A request made with raw bytes: header shapes an HTTP client library will not send. */
const rawRequest = (rnd: Random): FuzzRequest => {
  const line = rnd.pick([
    "GET /fhir/Patient/fuzz-p1 HTTP/1.1",
    "GET /fhir/Patient?name=%00 HTTP/1.1",
    "GET /fhir/Patient/\u0000 HTTP/1.1",
    "BREW /fhir/Patient HTTP/1.1",
    "GET /fhir/Patient HTTP/9.9",
    "GET  HTTP/1.1",
    "POST /fhir/Patient HTTP/1.1"
  ])
  const headers = [
    "Host: 127.0.0.1",
    rnd.pick(["", `X-Long: ${"a".repeat(rnd.int(10, 100_000))}`, "Bad Header: x", "Content-Length: 5\r\nContent-Length: 7", "Content-Length: -1", "Transfer-Encoding: chunked", "Accept: application/fhir+json", "Content-Type: application/fhir+json"]),
    "Connection: close"
  ].filter((h) => h !== "")
  const body = line.startsWith("POST") ? rnd.pick(["{}", "{\"resourceType\":\"Patient\"}", "0\r\n\r\n", "zz"]) : ""
  return { kind: "raw", method: line.split(" ")[0]!, path: line, headers: {}, raw: `${line}\r\n${headers.join("\r\n")}\r\n\r\n${body}` }
}

/** The `n`th kind of request, drawn from `rnd`. */
export const fuzzRequest = (rnd: Random): FuzzRequest => {
  const type = rnd.pick(["Patient", "Patient", "Observation", "Bundle"])
  switch (rnd.int(0, 11)) {
    case 0:
    case 1:
      return { kind: "search", method: rnd.pick(["GET", "GET", "POST", "HEAD"]), path: `/fhir/${rnd.pick(types)}?${query(rnd)}`, headers: headerValues(rnd) }
    case 2:
      return { kind: "create", method: "POST", path: `/fhir/${type}`, headers: { ...json, ...headerValues(rnd) }, body: resourceBody(rnd, type) }
    case 3: {
      const id = rnd.pick(["fuzz-p1", "fuzz-o1", "new-one", percent(nastyString(rnd, 70)), "%00", "a".repeat(65)])
      return { kind: "update", method: "PUT", path: `/fhir/${type}/${id}`, headers: { ...json, ...headerValues(rnd) }, body: resourceBody(rnd, type) }
    }
    case 4:
      return { kind: "xml", method: rnd.pick(["POST", "PUT"]), path: rnd.pick(["/fhir/Patient", "/fhir/Patient/fuzz-p1"]), headers: { "content-type": "application/fhir+xml", ...headerValues(rnd) }, body: xmlBody(rnd) }
    case 5: {
      const patch = patchBody(rnd)
      return { kind: "patch", method: "PATCH", path: rnd.pick(["/fhir/Patient/fuzz-p1", "/fhir/Patient?name=Fuzz", "/fhir/Patient/none"]), headers: { "content-type": patch.contentType, ...headerValues(rnd) }, body: patch.body }
    }
    case 6:
      return { kind: "bundle", method: "POST", path: "/fhir", headers: { ...json, ...headerValues(rnd) }, body: bundleBody(rnd) }
    case 7: {
      const segment = () => rnd.pick(["Patient", "fuzz-p1", "_history", "1", "99999999999999999999", "$validate", "$everything", "$meta", "$bogus", "_search", "metadata", "..", "%2e%2e", "%00", "%ZZ", "%ED%A0%80", percent(nastyString(rnd, 10)), ""])
      const path = Array.from({ length: rnd.int(1, 5) }, segment).join("/")
      return { kind: "path", method: rnd.pick(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]), path: `/fhir/${path}${rnd.chance(0.3) ? `?${query(rnd)}` : ""}`, headers: headerValues(rnd), ...(rnd.chance(0.3) ? { body: resourceBody(rnd, "Patient") } : {}) }
    }
    case 8: {
      const param = rnd.pick(["_count", "_offset", "_since", "_at", "_cursor", "_list"])
      const value = rnd.pick(["9223372036854775806", "-1", "0", "1e9", "x", "2020", "2020-02-30", "9999-12-31T23:59:59Z", percent(nastyString(rnd)), "%00"])
      return { kind: "history", method: "GET", path: `${rnd.pick(["/fhir/_history", "/fhir/Patient/_history", "/fhir/Patient/fuzz-p1/_history"])}?${param}=${value}`, headers: headerValues(rnd) }
    }
    case 9:
      return { kind: "header", method: rnd.pick(["GET", "PUT", "POST"]), path: rnd.pick(["/fhir/Patient/fuzz-p1", "/fhir/Patient", "/fhir/metadata"]), headers: { "content-type": rnd.pick(["application/fhir+json", "text/plain", "application/fhir+json; charset=latin1", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "", "application/fhir+json;fhirVersion=3.0"]), ...headerValues(rnd) }, body: resourceBody(rnd, "Patient") }
    case 10:
      return rawRequest(rnd)
    default:
      return { kind: "search-post", method: "POST", path: `/fhir/${type}/_search`, headers: { "content-type": "application/x-www-form-urlencoded", ...headerValues(rnd) }, body: query(rnd) }
  }
}
