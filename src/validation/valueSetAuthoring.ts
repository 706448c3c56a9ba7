/**
 * How a ValueSet's compose is written (https://hl7.org/fhir/R4/valueset.html#compose), judged against the
 * code systems and value sets the server holds:
 * - `include.system` carries no `|version` (the version goes in `include.version`); a `#id` system names
 *   exactly one contained CodeSystem; a `urn:oid:` system is not the identifier of a held code system
 *   (its url is to be used); a system that is a value set says which systems that value set uses;
 * - an imported value set (`include.valueSet`) is one the server holds, or can make (`?fhir_vs`); several
 *   imports in one include are intersected, which a warning recalls (https://jira.hl7.org/browse/FHIR-25179);
 * - concepts and filters need a system; when the system is unknown here (or an example system), the
 *   concepts cannot be checked and the include says so; a filter on a system the server does not hold uses
 *   a property generally known for it;
 * - the displays of listed concepts are those of the held code system (information only: they need not
 *   match), and an include gives displays for all of its concepts or none (SNOMED CT: all or none with
 *   their semantic tag).
 * The severities and texts follow the HL7 reference validator's ValueSet checks.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ValueSetDef } from "../catalog/definitions.ts"
import { isObject, type Json } from "../catalog/json.ts"
import { snomed } from "./codes.ts"
import type { Reporter, Rule } from "./Reporter.ts"
import { displayProblem, loinc } from "./terminology.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const absolute = /^[A-Za-z][A-Za-z0-9+.-]*:/

/** Beyond this many concepts an include's codes are not checked one by one (the reference validator's default limit). */
export const includeCodeLimit = 1000

const rxnorm = "http://www.nlm.nih.gov/research/umls/rxnorm"
const ucum = "http://unitsofmeasure.org"
const cpt = "http://www.ama-assn.org/go/cpt"
const bcp47 = "urn:ietf:bcp:47"

/**
 * Code systems that terminology services support though the server does not hold their content: their
 * codes are not "of an unknown system", only not checked here.
 */
const externalSystems = new Set([
  snomed, loinc, rxnorm, ucum, cpt, bcp47, "urn:ietf:bcp:13", "urn:iso:std:iso:3166", "urn:iso:std:iso:3166:-2",
  "urn:iso:std:iso:4217", "urn:iso:std:iso:639-1", "urn:iso:std:iso:639-2", "urn:iso:std:iso:11073-10101",
  "http://hl7.org/fhir/sid/ndc", "http://hl7.org/fhir/sid/cvx", "http://hl7.org/fhir/sid/icd-10", "http://hl7.org/fhir/sid/icd-10-cm",
  "http://hl7.org/fhir/sid/icd-9-cm", "http://hl7.org/fhir/sid/icd-10-pcs", "http://www.cms.gov/Medicare/Coding/ICD10",
  "http://www.whocc.no/atc", "http://fdasis.nlm.nih.gov", "http://www.genenames.org", "http://ncimeta.nci.nih.gov",
  "http://nucc.org/provider-taxonomy", "http://dicom.nema.org/resources/ontology/DCM", "http://www.nlm.nih.gov/research/umls",
  "https://www.usps.com/", "http://unstats.un.org/unsd/methods/m49/m49.htm", "http://varnomen.hgvs.org", "http://www.ensembl.org",
  "http://www.ebi.ac.uk/ipd/imgt/hla", "https://www.ncbi.nlm.nih.gov/refseq", "http://www.ncbi.nlm.nih.gov/clinvar",
  "http://www.sequenceontology.org", "http://cancer.sanger.ac.uk/cancergenome/projects/cosmic", "http://www.ncbi.nlm.nih.gov/nuccore",
  "https://precision.fda.gov/apps/", "http://www.nlm.nih.gov/research/umls/mesh"
])

/** The reference validator's example domains: such systems are not expected to be known. */
const isExampleSystem = (url: string): boolean =>
  ["example.org/", "acme.com/", "acme.org/", "example.com/", "example.net/"].some((part) => url.includes(part)) ||
  ["example.org", "acme.com", "acme.org", "example.com", "example.net"].some((end) => url.endsWith(end)) ||
  url.startsWith("urn:oid:1.3.6.1.4.1.32473.") || url.startsWith("urn:oid:2.999.")

/** The filter properties every code system has (as the reference validator lists them). */
const commonFilterProperties = [
  "concept", "code", "status", "inactive", "effectiveDate", "deprecationDate", "retirementDate", "notSelectable", "synonym", "comment", "itemWeight"
]

/** SNOMED CT's filter properties: the concept, ECL, and the attributes of its concept model. */
const snomedFilterProperties = [
  "concept", "constraint", "expressions", "inactive",
  ..."410662002 42752001 47429007 116676008 116686009 118168003 118169006 118170007 118171006 127489000 131195008 246075003 246090004 246093002 246112005 246454002 246456000 246501002 246513007 246514001 255234002 260507000 260686004 260870009 263502005 272741003 288556008 363589002 363698007 363699004 363700003 363701004 363702006 363703001 363704007 363705008 363709002 363710007 363713009 363714003 370129005 370130000 370131001 370132008 370133003 370134009 370135005 371881003 405813007 405814001 405815000 405816004 408729009 408730004 408731000 408732007 410675002 411116001 418775008 419066007 424226004 424244007 424361007 424876005 425391005 609096000 704319004 704320005 704321009 704322002 704323007 704324001 704325000 704326004 704327008 704346009 704347000 704647008 718497002 719715003 719722006 726542003 726633004 732943007 732945000 732947008 733722007 733725009 733928003 733930001 733931002 733932009 733933004 734136001 734137005 736472000 736473005 736474004 736475003 736476002 736518005 738774007 762705008 762706009 762949000 762951001 763032000 766939001 774081006 774158006 774159003 774160008 774163005 827081001 836358009 840560000 860779006 860781008 1003703000 1003735000 1142135004 1142136003 1142137007 1142138002 1142139005 1142140007 1142141006 1142142004 1142143009 1148793005 1148965004 1148967007 1148968002 1148969005 1149366004 1149367008 1230370004 320091000221107".split(" ")
]

/** LOINC's filter properties: its axes, parts, answer lists and the like. */
const loincFilterProperties = [
  ...commonFilterProperties,
  ..."ancestor descendent parent child COMPONENT PROPERTY TIME_ASPCT SYSTEM SCALE_TYP METHOD_TYP CLASS VersionLastChanged CHNG_TYPE DefinitionDescription STATUS CLASSTYPE FORMULA EXMPL_ANSWERS SURVEY_QUEST_TEXT SURVEY_QUEST_SRC UNITSREQUIRED ORDER_OBS HL7_FIELD_SUBFIELD_ID EXTERNAL_COPYRIGHT_NOTICE EXAMPLE_UNITS EXAMPLE_UCUM_UNITS STATUS_REASON STATUS_TEXT CHANGE_REASON_PUBLIC COMMON_TEST_RANK COMMON_ORDER_RANK HL7_ATTACHMENT_STRUCTURE EXTERNAL_COPYRIGHT_LINK PanelType AskAtOrderEntry AssociatedObservations VersionFirstReleased ValidHL7AttachmentRequest answer-list MAP_TO analyte analyte-core analyte-suffix analyte-numerator analyte-divisor analyte-divisor-suffix challenge adjustment count time-core time-modifier system-core super-system analyte-gene category search rad-modality-modality-type rad-modality-modality-subtype rad-anatomic-location-region-imaged rad-anatomic-location-imaging-focus rad-anatomic-location-laterality-presence rad-anatomic-location-laterality rad-view-aggregation rad-view-view-type rad-maneuver-maneuver-type rad-timing rad-pharmaceutical-substance-given rad-pharmaceutical-route rad-reason-for-exam rad-guidance-for-presence rad-guidance-for-approach rad-guidance-for-action rad-guidance-for-object rad-subject document-kind document-role document-setting document-subject-matter-domain document-type-of-service answers-for answer".split(" ")
]

/** The properties a filter may use on a system the server does not hold, by system. */
const externalFilterProperties: ReadonlyMap<string, ReadonlyArray<string>> = new Map([
  [snomed, snomedFilterProperties],
  [loinc, loincFilterProperties],
  [rxnorm, [...commonFilterProperties, ..."STY SAB TTY SY SIB RN PAR CHD RB RO IN PIN MIN BN SCD SBD GPCK BPCK SCDC SCDF SCDFP SCDG SCDGP SBDC SBDF SBDFP SBDG DF DFG".split(" ")]],
  [ucum, [...commonFilterProperties, "property", "canonical"]],
  [cpt, [...commonFilterProperties, "modifier", "kind", "modified", "telemedicine", "orthopox"]],
  [bcp47, [...commonFilterProperties, "language", "region", "script", "variant", "extension", "ext-lang", "private-use"]]
])

/** The held code systems by the `urn:oid:` identifiers they state, computed once per catalog when first asked. */
const oidIndexes = new WeakMap<Catalog, ReadonlyMap<string, ReadonlyArray<CodeSystemDef>>>()

const oidIndex = (catalog: Catalog): ReadonlyMap<string, ReadonlyArray<CodeSystemDef>> => {
  let index = oidIndexes.get(catalog)
  if (index === undefined) {
    const found = new Map<string, Array<CodeSystemDef>>()
    for (const codeSystem of catalog.codeSystems) {
      for (const identifier of list(codeSystem.resource["identifier"])) {
        if (!isObject(identifier) || typeof identifier["value"] !== "string") continue
        const value = identifier["value"]
        if (!value.startsWith("urn:oid:")) continue
        const oid = value
        const known = found.get(oid) ?? []
        if (!known.includes(codeSystem)) known.push(codeSystem)
        found.set(oid, known)
      }
    }
    index = found
    oidIndexes.set(catalog, index)
  }
  return index
}

/** The systems a value set's compose uses, sorted (each with its version when it names one). */
const systemsOf = (valueSet: ValueSetDef): ReadonlyArray<string> => {
  const systems = new Set<string>()
  for (const include of [...(valueSet.compose?.include ?? []), ...(valueSet.compose?.exclude ?? [])]) {
    if (include.system !== undefined) systems.add(include.version === undefined ? include.system : `${include.system}|${include.version}`)
  }
  return [...systems].sort()
}

/** What to say of `include.system` naming a value set: the systems that value set uses may be what was meant. */
export const wrongValueSetMessage = (valueSet: ValueSetDef, system: string): string => {
  const systems = systemsOf(valueSet)
  if (systems.length === 0) return `The system '${system}' is actually a value set`
  if (systems.length === 1) return `The system '${system}' is actually a value set, which itself refers to the system '${systems[0]}' so that may be what is intended here`
  return `The system '${system}' is actually a value set, which itself refers to the systems ${systems.join(", ")}`
}

/** A value set url the server can make without holding it: SNOMED CT and LOINC implicit value sets. */
const implicitValueSet = (url: string): boolean =>
  url.includes("?fhir_vs") || url.startsWith("http://loinc.org/vs")

/** The type of a held resource (not a value set) with this canonical url, if any. */
const otherResourceType = (catalog: Catalog, url: string): string | undefined => {
  if (catalog.codeSystem(url) !== undefined) return "CodeSystem"
  if (catalog.structureDefinition(url) !== undefined) return "StructureDefinition"
  if (catalog.searchParameterByUrl(url) !== undefined) return "SearchParameter"
  if (catalog.operations.some((operation) => operation.url === url)) return "OperationDefinition"
  if (catalog.compartments.some((compartment) => compartment.url === url)) return "CompartmentDefinition"
  return undefined
}

const displayNote = "Note that the display in the ValueSet does not have to match; this check exists to help check that it's not accidentally the wrong code"

/** A SNOMED CT display that ends with a semantic tag, as a fully specified name does: `Asthma (disorder)`. */
const semanticTagged = (display: string): boolean => {
  const open = display.lastIndexOf("(")
  return display.endsWith(")") && open > -1 && open > display.length - 20
}

const checkImports = (value: Json, include: Json, at: string, reporter: Reporter): void => {
  const catalog = reporter.registry.catalog
  const imports = list(include["valueSet"])
  imports.forEach((url, k) => {
    if (typeof url !== "string" || url === "") return
    const bare = url.replace(/\|.*$/, "")
    // `#id`: a contained resource of the value set.
    const contained = bare.startsWith("#") ? list(value["contained"]).find((item) => isObject(item) && `#${String(item["id"])}` === bare) : undefined
    if (isObject(contained) && contained["resourceType"] === "ValueSet") return
    if (catalog.valueSet(url) !== undefined || catalog.valueSet(bare) !== undefined || implicitValueSet(bare)) return
    const type = isObject(contained) ? String(contained["resourceType"]) : otherResourceType(catalog, bare)
    reporter.report("warning", "business-rule", `${at}.valueSet[${k}]`, type === undefined
      ? `The value set import ${url} could not be found so cannot be checked`
      : `The value set import ${url} points to a resource of type ${type} which is not valid`)
  })
  if (imports.length > 1) {
    reporter.report("warning", "informational", at, "This value set has a single include with multiple imported value sets. Per issue https://jira.hl7.org/browse/FHIR-25179, there has been confusion in the past whether these value sets are unioned or intersectioned. If this value set is contained in a package published prior to March 31 2022, it will be treated as a union, otherwise it will be treated as an intersection. If want a union, split the value set imports across multiple includes")
  }
}

/** `include.system` of the form `#id`: exactly one contained CodeSystem has that id (and the version asked for). */
const checkContainedSystem = (value: Json, at: string, system: string, version: string | undefined, reporter: Reporter): void => {
  const found: Array<Json> = []
  for (const contained of list(value["contained"])) {
    if (!isObject(contained) || `#${String(contained["id"])}` !== system) continue
    if (contained["resourceType"] !== "CodeSystem") {
      reporter.report("error", "invalid", at, `The include system '${system}' is a reference to a contained resource, but the contained resource with that id is not a CodeSystem, it's a ${String(contained["resourceType"])}`)
    } else if (version === undefined || contained["version"] === version) {
      found.push(contained)
    }
  }
  if (found.length === 0) {
    reporter.report("error", "invalid", at, version === undefined
      ? `No matching contained code system found for system '${system}'`
      : `No matching contained code system found for system '${system}' version '${version}'`)
  } else if (found.length > 1) {
    reporter.report("error", "invalid", at, version === undefined
      ? `Multiple matching contained code systems found for system '${system}'`
      : `Multiple matching contained code systems found for system '${system}' version '${version}'`)
  }
}

/** The concepts of an include: their displays all given or all missing, SNOMED CT ones all with or all without a semantic tag. */
const checkDisplayMix = (concepts: ReadonlyArray<Json>, at: string, system: string, reporter: Reporter): void => {
  const displays = concepts.map((concept) => (typeof concept["display"] === "string" && concept["display"] !== "" ? concept["display"] : undefined))
  const given = displays.filter((display): display is string => display !== undefined)
  if (given.length > 0 && given.length < displays.length) {
    reporter.report("information", "business-rule", at, "This include has some concepts with displays and some without - check that this is what is intended")
  }
  if (system !== snomed) return
  const tagged = given.filter(semanticTagged)
  const untagged = given.filter((display) => !semanticTagged(display))
  if (tagged.length > 0 && untagged.length > 0) {
    reporter.report("information", "business-rule", at, `This SNOMED-CT based include has some concepts with semantic tags (FSN terms) and some without (preferred terms) - check that this is what is intended (examples for FSN: [${tagged.slice(0, 5).join(", ")}] and examples for no FSN: [${untagged.slice(0, 5).join(", ")}])`)
  }
}

const checkInclude = (value: Json, include: Json, at: string, reporter: Reporter): void => {
  const catalog = reporter.registry.catalog
  const version = typeof include["version"] === "string" ? include["version"] : undefined
  let system = typeof include["system"] === "string" ? include["system"] : undefined
  if (system !== undefined && system.includes("|")) {
    const given = system.slice(system.indexOf("|") + 1)
    system = system.slice(0, system.indexOf("|"))
    if (given === "") {
      reporter.report("warning", "business-rule", at, `Value set System reference '${system}' ends with a '|' which is suspicious. Note that the reference must not use the canonical version syntax; the version goes in the .version property`)
    } else if (version === undefined) {
      reporter.report("error", "business-rule", at, `Value set System references must not use the canonical version syntax - the version '${given}' should be in the version property`)
    } else if (given !== version) {
      reporter.report("error", "business-rule", at, `Value set System references must not use the canonical version syntax - the version '${given}' should be in the version property, but that already contains '${version}'`)
    } else {
      reporter.report("error", "business-rule", at, `Value set System references must not use the canonical version syntax - the version '${given}' is already in the version property`)
    }
  }
  checkImports(value, include, at, reporter)
  const concepts = list(include["concept"]).filter(isObject)
  const filters = list(include["filter"]).filter(isObject)
  if (system === undefined || system === "") {
    if (concepts.length > 0 || filters.length > 0) {
      reporter.report("warning", "business-rule", at, "No System specified, so Concepts and Filters can't be checked")
    }
    return
  }
  if (system.startsWith("#")) {
    checkContainedSystem(value, at, system, version, reporter)
    return
  }
  // A relative system is an error of its own (terminologyResources.ts); nothing more can be said of it.
  if (!absolute.test(system)) return
  const exact = version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)
  const held = exact ?? catalog.codeSystem(system)
  const versionHeld = held !== undefined && (version === undefined || exact !== undefined || held.version === undefined || held.version === version)
  if (held === undefined) {
    if (system.startsWith("urn:oid:")) {
      const named = oidIndex(catalog).get(system) ?? []
      if (named.length === 1) {
        reporter.report("error", "invalid", at, `It is not valid to refer to a CodeSystem by an identifier like this '${system}' - use '${named[0]!.url}'`)
      } else if (named.length > 1) {
        const urls = named.map((codeSystem) => (codeSystem.version === undefined ? codeSystem.url : `${codeSystem.url}|${codeSystem.version}`))
        reporter.report("error", "invalid", at, `It is not valid to refer to a CodeSystem by an identifier like this '${system}', and the identifier matches to multiple CodeSystem resources (${urls.join(",")})`)
      }
    }
    filters.forEach((filter, j) => {
      const property = filter["property"]
      if (typeof property !== "string") return
      const known = externalFilterProperties.get(system!) ?? commonFilterProperties
      if (!known.includes(property)) {
        reporter.report("information", "invalid", `${at}.filter[${j}]`, `No definition can be found for the system ${system}, and the property '${property}' is not a generally known property, so the property might not be valid, or understood by the terminology ecosystem. In case it's useful, the list of generally known properties for all systems is ${known.join(",")}`)
      }
    })
    // A value set named as the system is an error of its own (terminologyResources.ts): its concepts are not checked.
    if (catalog.valueSet(system) !== undefined) return
    if (concepts.length > includeCodeLimit) {
      tooMany(at, concepts.length, reporter)
    } else if (externalSystems.has(system)) {
      if (concepts.length > 1) checkDisplayMix(concepts, at, system, reporter)
    } else if (concepts.length > 1) {
      reporter.report("information", "business-rule", at, `The concepts in the value set include have not been validated because the code system '${system}' is not known, and no terminology service supports it`)
    } else if (concepts.length === 1) {
      unknownSystem(at, system, version, reporter)
    }
    return
  }
  if (held.content === "supplement") return
  if (!versionHeld) {
    if (concepts.length > includeCodeLimit) {
      tooMany(at, concepts.length, reporter)
    } else if (concepts.length > 1) {
      reporter.report("information", "business-rule", at, `The concepts in the value set include have not been validated because the code system '${system}|${version}' is not known, and no terminology service supports it`)
    } else if (concepts.length === 1) {
      unknownSystem(at, system, version, reporter)
    }
    return
  }
  const content = held.content === "complete" || held.content === "fragment" || held.content === "example"
  // Without the content, the codes are checked only where a terminology service would check them.
  if (!content && !externalSystems.has(system)) return
  if (concepts.length > includeCodeLimit) {
    tooMany(at, concepts.length, reporter)
    return
  }
  if (concepts.length > 1) checkDisplayMix(concepts, at, system, reporter)
  if (!content) return
  if (held.content === "example") return
  list(include["concept"]).forEach((concept, j) => {
    if (!isObject(concept) || typeof concept["code"] !== "string" || typeof concept["display"] !== "string") return
    const found = held.concept(concept["code"])
    if (found === undefined) return
    const problem = displayProblem(system!, found, concept["display"])
    if (problem !== undefined) reporter.report("information", "informational", `${at}.concept[${j}]`, `${problem}. ${displayNote}`)
  })
}

const tooMany = (at: string, count: number, reporter: Reporter): void => {
  reporter.report("information", "business-rule", at, `The value set include has too many concepts to validate (${count}, more than the limit of ${includeCodeLimit}), so each individual code has not been checked`)
}

/** The single concept of an include whose system is not known here: an example system, or an unknown one. */
const unknownSystem = (at: string, system: string, version: string | undefined, reporter: Reporter): void => {
  if (version === undefined && isExampleSystem(system)) {
    if (reporter.options?.examples === true) {
      reporter.report("information", "business-rule", at, `Example System '${system}' specified, so Concepts and Filters can't be checked`)
    } else {
      reporter.report("error", "business-rule", at, `Example System '${system}' specified, which is illegal. Concepts and Filters can't be checked`)
    }
    return
  }
  reporter.report("warning", "business-rule", at, version === undefined
    ? `Unknown System '${system}' specified, so Concepts and Filters can't be checked (Details: A definition for CodeSystem '${system}' could not be found)`
    : `Unknown System/Version '${system}#${version}' specified, so Concepts and Filters can't be checked (Details: A definition for CodeSystem '${system}' version '${version}' could not be found)`)
}

const valueSetAuthoring: Rule = (value, path, reporter) => {
  const compose = value["compose"]
  if (!isObject(compose)) return
  for (const part of ["include", "exclude"] as const) {
    list(compose[part]).forEach((include, i) => {
      if (isObject(include)) checkInclude(value, include, `${path}.compose.${part}[${i}]`, reporter)
    })
  }
}

export const valueSetAuthoringRules: ReadonlyArray<readonly [string, Rule]> = [["ValueSet", valueSetAuthoring]]
