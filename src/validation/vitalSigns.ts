/**
 * The vital signs profiles R4 requires of an Observation by its code
 * (https://hl7.org/fhir/R4/observation-vitalsigns.html): "If a resource is a vital sign observation, it
 * SHALL conform to the profile", whatever its meta.profile says. An Observation whose `code` has one of
 * the LOINC (or SNOMED CT) codes of a vital sign is checked against that sign's profile, with the codes the
 * HL7 reference validator uses to recognise them.
 */
import { isObject } from "../catalog/json.ts"

const base = "http://hl7.org/fhir/StructureDefinition/"

/** Per profile, the codes that make an Observation that vital sign; the first profile that matches applies. */
const signs: ReadonlyArray<{ readonly profile: string; readonly loinc: ReadonlyArray<string>; readonly snomed: ReadonlyArray<string> }> = [
  { profile: "vitalspanel", loinc: ["85353-1"], snomed: ["46680005"] },
  { profile: "resprate", loinc: ["9279-1", "76170-0", "76172-6", "76171-8", "19840-8", "33438-3", "76270-8", "11291-2"], snomed: ["86290005", "271625008", "271306003"] },
  {
    profile: "heartrate",
    loinc: ["60978-4", "73795-7", "73799-9", "76476-1", "76477-9", "8867-4", "8889-8", "8890-6", "8891-4", "8892-2", "8893-0", "40443-4", "55425-3", "68999-2", "11328-2", "69000-8", "8886-4"],
    snomed: ["271306003", "249043002", "444981005", "399017001", "251670001", "429525003", "429614003"]
  },
  { profile: "oxygensat", loinc: ["2708-6", "19224-5", "20564-1", "2709-4", "2710-2", "2713-6", "51733-4", "59408-5", "59417-6", "89276-0", "97549-0"], snomed: ["442476006", "431314004"] },
  {
    profile: "bodytemp",
    loinc: ["8310-5", "60834-9", "60835-6", "60836-4", "60838-0", "60955-2", "61009-7", "75539-7", "75987-8", "76010-8", "76011-6", "76278-1", "8309-7", "8328-7", "8329-5", "8330-3", "8331-1", "8332-9", "8333-7", "8334-5", "91371-5", "98657-0", "98663-8"],
    snomed: ["386725007", "276885007", "300076005", "1222808002", "364246006", "307047009", "708499008", "431598003", "698831002", "698832009", "415882003", "415974002", "415929009", "415945006"]
  },
  { profile: "bodyheight", loinc: ["8302-2", "3137-7", "3138-5", "8306-3", "8308-9"], snomed: ["1153637007", "1162419008", "50373000", "1162418000", "1230278008", "1162392001", "1162417005"] },
  { profile: "headcircum", loinc: ["9843-4", "8287-5"], snomed: ["363812007", "169876006", "1269262007", "363811000"] },
  { profile: "bodyweight", loinc: ["29463-7", "3141-9", "3142-7", "75292-3", "79348-9", "8350-1", "8351-9"], snomed: ["735395000", "425024002", "424927000", "784399000", "1162416001", "1162415002"] },
  { profile: "bmi", loinc: ["39156-5", "89270-3"], snomed: ["60621009"] },
  {
    profile: "bp",
    loinc: ["85354-9", "35094-2", "8459-0", "76534-7", "55284-4", "8480-6"],
    snomed: ["251076008", "163033001", "163035008", "386534000", "386536003", "271649006", "271650006", "407556006", "407554009", "716579001", "399304008"]
  }
]

const loincSigns = signs.map((sign) => new Set(sign.loinc))
const snomedSigns = signs.map((sign) => new Set(sign.snomed))

const hasCode = (codings: ReadonlyArray<unknown>, system: string, codes: ReadonlySet<string>): boolean =>
  codings.some((coding) => isObject(coding) && coding["system"] === system && typeof coding["code"] === "string" && codes.has(coding["code"]))

/** The vital signs profile an Observation must meet by its code, if any (LOINC codes are looked at first). */
export const vitalSignsProfile = (observation: Record<string, unknown>): string | undefined => {
  const code = observation["code"]
  const codings = isObject(code) ? code["coding"] : undefined
  if (!Array.isArray(codings) || codings.length === 0) return undefined
  for (let i = 0; i < signs.length; i++) {
    if (hasCode(codings, "http://loinc.org", loincSigns[i]!)) return base + signs[i]!.profile
  }
  for (let i = 0; i < signs.length; i++) {
    if (hasCode(codings, "http://snomed.info/sct", snomedSigns[i]!)) return base + signs[i]!.profile
  }
  return undefined
}
