/**
 * Rules on canonical resources that HL7 publishes (https://hl7.org/fhir/R4/resource.html#canonical), those
 * whose `url` starts with http://hl7.org/fhir/, as the HL7 reference validator checks them outside its
 * examples mode: the owning work group, given with the structuredefinition-wg extension
 * (https://hl7.org/fhir/R4/extension-structuredefinition-wg.html), is stated once, is a known HL7 work group
 * (the code system http://terminology.hl7.org/CodeSystem/hl7-work-group), and agrees with the `publisher`
 * ("HL7 International / " and the work group's name) and with the contact urls (one of them leads to the work
 * group's page). The work groups are those the reference validator knows, with those of the code system when
 * the catalog holds it.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject, type Json } from "../catalog/json.ts"
import { canonicalResourceTypes } from "./canonical.ts"
import type { Rule } from "./Reporter.ts"

const workGroupUrl = "http://hl7.org/fhir/StructureDefinition/structuredefinition-wg"
const workGroupSystem = "http://terminology.hl7.org/CodeSystem/hl7-work-group"

interface WorkGroup {
  /** The names a publisher may give after "HL7 International / ". */
  readonly names: ReadonlyArray<string>
  /** The work group's page, which a contact url leads to. */
  readonly link: string
}

const committees = "http://www.hl7.org/Special/committees/"

/** Code, name, page under committees/ (and a second name). */
const known: ReadonlyArray<readonly [string, string, string, string?]> = [
  ["aid", "Application Implementation and Design", "java"], ["arden", "Arden Syntax", "arden"],
  ["brr", "Biomedical Research and Regulation", "rcrim"], ["cbcc", "Community Based Collaborative Care", "cbcc"],
  ["cdamg", "CDA Management Group", "cdamg"], ["cds", "Clinical Decision Support", "dss"],
  ["cg", "Clinical Genomics", "clingenomics"], ["cgp", "Cross-Group Projects", "cgp"],
  ["cic", "Clinical Interoperability Council", "cic"], ["cimi", "Clinical Information Modeling Initiative", "cimi"],
  ["claims", "Payer/Provider Information Exchange Work Group", "claims"], ["cqi", "Clinical Quality Information", "cqi"],
  ["dev", "Devices", "healthcaredevices"], ["ehr", "Electronic Health Records", "ehr"], ["ec", "Emergency Care", "emergencycare"],
  ["fhir", "FHIR Infrastructure", "fiwg"], ["fmg", "FHIR Management Group", "fhirmg"], ["fm", "Financial Management", "fm"],
  ["hsi", "Health Standards Integration", "hsi"], ["hsswg", "Human and Social Services", "hsswg"],
  ["hta", "Terminology Authority", "termauth"], ["ictc", "Conformance", "ictc"], ["ii", "Imaging Integration", "imagemgt"],
  ["inm", "Infrastructure And Messaging", "inm"], ["its", "Implementable Technology Specifications", "xml"],
  ["lhs", "Learning Health Systems", "lhs"], ["mnm", "Modeling and Methodology", "mnm"], ["mobile", "Mobile Health", "mobile"],
  ["oo", "Orders and Observations", "orders"], ["pa", "Patient Administration", "pafm"],
  ["pe", "Patient Empowerment", "patientempowerment"], ["pc", "Patient Care", "patientcare"], ["pher", "Public Health", "pher"],
  ["phx", "Pharmacy", "medication"], ["sd", "Structured Documents", "structure"], ["sec", "Security", "secure"],
  ["soa", "Services Oriented Architecture", "soa"], ["ti", "Terminology Infrastructure", "Vocab", "Vocabulary"],
  ["tsmg", "Terminology Services Management Group (TSMG)", "tsmg"], ["us", "US Realm Steering Committee", "usrealm"],
  ["v2", "V2 Management Group", "v2management"], ["vocab", "Terminology Infrastructure", "Vocab", "Vocabulary"]
]

const builtIn: ReadonlyMap<string, WorkGroup> = new Map(known.map(([code, name, page, name2]) =>
  [code, { names: name2 === undefined ? [name] : [name, name2], link: `${committees}${page}` }]))

const workGroupsByCatalog = new WeakMap<Catalog, ReadonlyMap<string, WorkGroup>>()

/** The built-in work groups, with the names and codes the catalog's hl7-work-group code system adds. */
const workGroups = (catalog: Catalog): ReadonlyMap<string, WorkGroup> => {
  const cached = workGroupsByCatalog.get(catalog)
  if (cached !== undefined) return cached
  const result = new Map(builtIn)
  for (const concept of catalog.codeSystem(workGroupSystem)?.concepts() ?? []) {
    const display = concept.display
    if (display === undefined) continue
    const present = result.get(concept.code)
    if (present !== undefined) {
      if (!present.names.includes(display)) result.set(concept.code, { ...present, names: [...present.names, display] })
      continue
    }
    // The definition names the page: "Education (http://www.hl7.org/Special/committees/education/index.cfm)".
    const page = /\((https?:\/\/[^)\s]+?)(?:\/index\.cfm)?\)/.exec(concept.definition ?? "")?.[1]
    result.set(concept.code, { names: [display], link: page ?? `${committees}${concept.code}` })
  }
  workGroupsByCatalog.set(catalog, result)
  return result
}

const hl7Artefact: Rule = (value, path, reporter) => {
  if (reporter.options?.examples === true) return
  const url = value["url"]
  if (typeof url !== "string" || !url.startsWith("http://hl7.org/fhir/")) return
  const extensions = (Array.isArray(value["extension"]) ? value["extension"] : []).filter((e): e is Json => isObject(e) && e["url"] === workGroupUrl)
  if (extensions.length > 1) {
    reporter.report("error", "business-rule", path, `The resource has more than one work group extension (${workGroupUrl})`)
  }
  const code = extensions[0]?.["valueCode"]
  if (typeof code !== "string") return
  const group = workGroups(reporter.registry.catalog).get(code)
  if (group === undefined) {
    reporter.report("error", "business-rule", path, `The work group '${code}' is unknown`)
    return
  }
  const expected = group.names.map((name) => `HL7 International / ${name}`)
  const publisher = value["publisher"]
  if (typeof publisher !== "string") {
    reporter.report("warning", "business-rule", path, `A resource HL7 publishes states its publisher: for the work group '${code}' it is '${expected[0]}'`)
  } else if (!expected.includes(publisher)) {
    // A publisher written "HL7 International / ..." is meant as a work group's, and then naming the wrong one is an error.
    reporter.report(publisher.includes("/") ? "error" : "warning", "business-rule", path,
      `The work group '${code}' means the publisher should be ${expected.map((e) => `'${e}'`).join(" or ")}, but it is '${publisher}'`)
  }
  const contactUrls: Array<string> = []
  for (const contact of Array.isArray(value["contact"]) ? value["contact"] : []) {
    if (!isObject(contact) || !Array.isArray(contact["telecom"])) continue
    for (const telecom of contact["telecom"]) {
      if (isObject(telecom) && telecom["system"] === "url" && typeof telecom["value"] === "string") contactUrls.push(telecom["value"])
    }
  }
  // The reference validator asks for a contact url the page's address starts with; its own address with a page
  // name after it (".../fiwg/index.cfm", as R4 writes it) is taken too.
  if (!contactUrls.some((contactUrl) => group.link.startsWith(contactUrl) || contactUrl.startsWith(`${group.link}/`))) {
    reporter.report("warning", "business-rule", path, `The work group '${code}' means a contact url should lead to '${group.link}', but none does`)
  }
}

export const hl7ArtefactRules: ReadonlyArray<readonly [string, Rule]> = [...canonicalResourceTypes].map((type) => [type, hl7Artefact] as const)
