/**
 * The resources of hl7.fhir.r4.examples@4.0.1 that the validator rejects, each a defect of the published
 * resource that the HL7 reference validator reports as an error too: what is wrong, and the text an error
 * must contain to show that it is refused for that reason (test/validation/examples.test.ts checks both
 * ways: every other example is accepted, and each of these is refused with these errors; the REST tests
 * expect 422).
 */

export interface Defect {
  /** What is wrong with the published resource. */
  readonly reason: string
  /** Each is part of the text (`expression: diagnostics`) of one of the errors. */
  readonly errors: ReadonlyArray<string>
}

export const defects: Readonly<Record<string, Defect>> = {
  "ActivityDefinition-blood-tubes-supply.json": { reason: "empty narrative (txt-2)", errors: ["txt-2"] },
  "ActivityDefinition-heart-valve-replacement.json": { reason: "empty narrative (txt-2)", errors: ["txt-2"] },
  "EventDefinition-example.json": { reason: "empty narrative (txt-2)", errors: ["txt-2"] },
  "Questionnaire-zika-virus-exposure-assessment.json": { reason: "narrative of whitespace only (txt-2)", errors: ["txt-2"] },
  "ImagingStudy-example-xr.json": { reason: "SNOMED RT code T-15460 given as SNOMED CT", errors: ["'T-15460' is not a SNOMED CT identifier"] },
  "PlanDefinition-example-cardiology-os.json": { reason: "the placeholder 'look up value' given as a SNOMED CT code", errors: ["'look up value' is not a SNOMED CT identifier"] },
  "NutritionOrder-enteralcontinuous.json": { reason: "SNOMED CT id 6547210000124112 with a wrong check digit", errors: ["'6547210000124112' is not a SNOMED CT identifier (its check digit is wrong)"] },
  "ImplementationGuide-fhir.json": { reason: "no name and no status (both required)", errors: ["ImplementationGuide.name: minimum required = 1", "ImplementationGuide.status: minimum required = 1"] },
  "ig-r4.json": { reason: "no name and no status (both required)", errors: ["ImplementationGuide.name: minimum required = 1", "ImplementationGuide.status: minimum required = 1"] },
  "Bundle-dataelements.json": { reason: "logical models whose types (date.id, dateTime.value...) are neither FHIR types nor absolute urls; the same fullUrl on several entries (bdl-7) is not reached, validation stops at 500 errors first", errors: ["is not defined by FHIR: a type defined elsewhere is named by an absolute url"] },
  "Bundle-valuesets.json": { reason: "the SNOMED CT CodeSystem declares the property code 'Laterality' twice", errors: ["A property is already defined with the code 'Laterality'"] },
  "Questionnaire-qs1.json": { reason: "items without linkId (required)", errors: ["Questionnaire.item.linkId: minimum required = 1"] },
  "CodeSystem-snomedct.json": { reason: "declares the property code 'Laterality' twice", errors: ["A property is already defined with the code 'Laterality'"] },
  "StructureDefinition-Definition.json": { reason: "logical model, not abstract, without baseDefinition (sdf-4)", errors: ["sdf-4"] },
  "StructureDefinition-Event.json": { reason: "logical model, not abstract, without baseDefinition (sdf-4)", errors: ["sdf-4"] },
  "StructureDefinition-FiveWs.json": { reason: "logical model, not abstract, without baseDefinition (sdf-4)", errors: ["sdf-4"] },
  "StructureDefinition-Request.json": { reason: "logical model, not abstract, without baseDefinition (sdf-4)", errors: ["sdf-4"] },
  "SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json": { reason: "an id longer than 64 characters", errors: ["Invalid resource id 'questionnaireresponse-extensions-QuestionnaireResponse-item-subject'"] },
  "Bundle-resources.json": { reason: "the Consent definition's Identifier example has system urn:ietf:rfc:3986 and a value that is not a URI", errors: ["if identifier.system is 'urn:ietf:rfc:3986', then the identifier.value must be a full URI"] },
  "StructureDefinition-Consent.json": { reason: "an Identifier example has system urn:ietf:rfc:3986 and a value that is not a URI", errors: ["if identifier.system is 'urn:ietf:rfc:3986', then the identifier.value must be a full URI"] },
  "Organization-2.16.840.1.113883.19.5.json": { reason: "identifier with system urn:ietf:rfc:3986 and a bare OID as value (not a URI)", errors: ["not '2.16.840.1.113883.19.5'"] },
  "CapabilityStatement-example.json": { reason: "url urn:uuid: with an uppercase UUID", errors: ["UUIDs must be valid and lowercase"] },
  "TerminologyCapabilities-example.json": { reason: "url urn:uuid: with an uppercase UUID", errors: ["UUIDs must be valid and lowercase"] },
  "Observation-f202.json": { reason: "a body temperature (LOINC 8310-5) without effective[x], which R4's body temperature profile, required of it by its code, makes mandatory", errors: ["Observation.effective[x]: minimum required = 1, but only found 0 (vital signs profile http://hl7.org/fhir/StructureDefinition/bodytemp"] },
  "ValueSet-v2-2.1-0006.json": { reason: "compose.include.system names the code system version after a bar (|2.1) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.1'"] },
  "ValueSet-v2-2.3.1-0360.json": { reason: "compose.include.system names the code system version after a bar (|2.3.1) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.3.1'"] },
  "ValueSet-v2-2.4-0006.json": { reason: "compose.include.system names the code system version after a bar (|2.4) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.4'"] },
  "ValueSet-v2-2.4-0391.json": { reason: "compose.include.system names the code system version after a bar (|2.4) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.4'"] },
  "ValueSet-v2-2.6-0391.json": { reason: "compose.include.system names the code system version after a bar (|2.6) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.6'"] },
  "ValueSet-v2-2.7-0360.json": { reason: "compose.include.system names the code system version after a bar (|2.7) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.7'"] },
  "Bundle-v2-valuesets.json": { reason: "a value set whose compose.include.system names the code system version after a bar (|2.6) instead of in include.version", errors: ["Value set System references must not use the canonical version syntax - the version '2.6'"] },
  "StructureDefinition-ExplanationOfBenefit.json": { reason: "binds ExplanationOfBenefit.priority to the url of a CodeSystem (processpriority), not of a ValueSet", errors: ["points to something that is not a value set (CodeSystem)"] },
  "Bundle-v3-valuesets.json": { reason: "its narrative links to #NAV (and other anchors) that the narrative does not have", errors: ["The narrative's link '#NAV' points at nothing"] },
  "CodeSystem-v3-ActCode.json": { reason: "its narrative links to #LFEMX (and other anchors) that the narrative does not have", errors: ["The narrative's link '#LFEMX' points at nothing"] },
  "CodeSystem-v3-ActReason.json": { reason: "its narrative links to #NORECMTCH (and other anchors) that the narrative does not have", errors: ["The narrative's link '#NORECMTCH' points at nothing"] },
  "CodeSystem-v3-ActRelationshipType.json": { reason: "its narrative links to #CONCURRENT (and other anchors) that the narrative does not have", errors: ["The narrative's link '#CONCURRENT' points at nothing"] },
  "CodeSystem-v3-CalendarCycle.json": { reason: "its narrative links to #CW (and other anchors) that the narrative does not have", errors: ["The narrative's link '#CW' points at nothing"] },
  "CodeSystem-v3-ContextControl.json": { reason: "its narrative links to #AN (and other anchors) that the narrative does not have", errors: ["The narrative's link '#AN' points at nothing"] },
  "CodeSystem-v3-EntityCode.json": { reason: "its narrative links to #BLSTRPK (and other anchors) that the narrative does not have", errors: ["The narrative's link '#BLSTRPK' points at nothing"] },
  "CodeSystem-v3-EntityNamePartQualifier.json": { reason: "its narrative links to #IN (and other anchors) that the narrative does not have", errors: ["The narrative's link '#IN' points at nothing"] },
  "CodeSystem-v3-NullFlavor.json": { reason: "its narrative links to #NAV (and other anchors) that the narrative does not have", errors: ["The narrative's link '#NAV' points at nothing"] },
  "CodeSystem-v3-ObservationInterpretation.json": { reason: "its narrative links to #HH (and other anchors) that the narrative does not have", errors: ["The narrative's link '#HH' points at nothing"] },
  "CodeSystem-v3-RoleCode.json": { reason: "its narrative links to #DAUADOPT (and other anchors) that the narrative does not have", errors: ["The narrative's link '#DAUADOPT' points at nothing"] },
  "CodeSystem-v3-RouteOfAdministration.json": { reason: "its narrative links to #IONTO (and other anchors) that the narrative does not have", errors: ["The narrative's link '#IONTO' points at nothing"] },
  "CodeSystem-v3-hl7Realm.json": { reason: "its narrative links to #AffiliateRealms (and other anchors) that the narrative does not have", errors: ["The narrative's link '#AffiliateRealms' points at nothing"] },
  "CodeSystem-v3-orderableDrugForm.json": { reason: "its narrative links to #DROP (and other anchors) that the narrative does not have", errors: ["The narrative's link '#DROP' points at nothing"] },
  "Media-sound.json": { reason: "its narrative shows the image #11, which names no id of the resource (no contained Binary or element has it)", errors: ["The narrative's image '#11' points at nothing"] },
  "ValueSet-v3-ActCode.json": { reason: "its narrative links to #LFEMX (and other anchors) that the narrative does not have", errors: ["The narrative's link '#LFEMX' points at nothing"] },
  "ValueSet-v3-ActReason.json": { reason: "its narrative links to #NORECMTCH (and other anchors) that the narrative does not have", errors: ["The narrative's link '#NORECMTCH' points at nothing"] },
  "ValueSet-v3-ActRelationshipType.json": { reason: "its narrative links to #CONCURRENT (and other anchors) that the narrative does not have", errors: ["The narrative's link '#CONCURRENT' points at nothing"] },
  "ValueSet-v3-CalendarCycle.json": { reason: "its narrative links to #CW (and other anchors) that the narrative does not have", errors: ["The narrative's link '#CW' points at nothing"] },
  "ValueSet-v3-ContextControl.json": { reason: "its narrative links to #AN (and other anchors) that the narrative does not have", errors: ["The narrative's link '#AN' points at nothing"] },
  "ValueSet-v3-EntityCode.json": { reason: "its narrative links to #BLSTRPK (and other anchors) that the narrative does not have", errors: ["The narrative's link '#BLSTRPK' points at nothing"] },
  "ValueSet-v3-EntityNamePartQualifier.json": { reason: "its narrative links to #IN (and other anchors) that the narrative does not have", errors: ["The narrative's link '#IN' points at nothing"] },
  "ValueSet-v3-NullFlavor.json": { reason: "its narrative links to #NAV (and other anchors) that the narrative does not have", errors: ["The narrative's link '#NAV' points at nothing"] },
  "ValueSet-v3-ObservationInterpretation.json": { reason: "its narrative links to #HH (and other anchors) that the narrative does not have", errors: ["The narrative's link '#HH' points at nothing"] },
  "ValueSet-v3-RoleCode.json": { reason: "its narrative links to #DAUADOPT (and other anchors) that the narrative does not have", errors: ["The narrative's link '#DAUADOPT' points at nothing"] },
  "ValueSet-v3-RouteOfAdministration.json": { reason: "its narrative links to #IONTO (and other anchors) that the narrative does not have", errors: ["The narrative's link '#IONTO' points at nothing"] },
  "ValueSet-v3-hl7Realm.json": { reason: "its narrative links to #AffiliateRealms (and other anchors) that the narrative does not have", errors: ["The narrative's link '#AffiliateRealms' points at nothing"] },
  "ValueSet-v3-orderableDrugForm.json": { reason: "its narrative links to #DROP (and other anchors) that the narrative does not have", errors: ["The narrative's link '#DROP' points at nothing"] },
  "Library-zika-virus-intervention-logic.json": { reason: "value sets given as the placeholder urn:oid:X.Y.Z, not an OID", errors: ["OIDs must be valid (X.Y.Z)"] },
  "CapabilityStatement-knowledge-repository.json": { reason: "search parameters stated as string whose definitions (Library-version...) are of type token", errors: ["Library-version has the type token, but the type here is string"] },
  "CapabilityStatement-measure-processor.json": { reason: "the search parameter Measure-version stated as string; its definition is of type token", errors: ["Measure-version has the type token, but the type here is string"] },
  "CapabilityStatement-terminology-server.json": { reason: "search parameters stated with types other than their definitions' (ValueSet-reference is uri, ConceptMap-source reference)", errors: ["ValueSet-reference has the type uri, but the type here is token"] },
  "ImplementationGuide-example.json": { reason: "url under http://hl7.org/fhir/ without the standards-status and work-group extensions a guide HL7 publishes states", errors: ["structuredefinition-wg"] },
  "SearchParameter-example-extension.json": { reason: "the expression is on DocumentReference while the base is Patient", errors: ["Error in search expression"] },
  "StructureDefinition-example-composition.json": { reason: "kind complex-type while its base Composition is a resource", errors: ["The kind complex-type is not the kind resource"] },
  "StructureDefinition-example-section-library.json": { reason: "kind complex-type while its base Composition is a resource", errors: ["The kind complex-type is not the kind resource"] },
  "ValueSet-example-hierarchical.json": { reason: "compose.include.system '#hacked' is a local reference, not an absolute URI", errors: ["ValueSet.compose.include.system must be absolute"] },
  "Bundle-10bb101f-a121-4264-a920-67be9cb82c74.json": { reason: "the fullUrl of an entry ends with Patient/pat12, its resource's id is pat2", errors: ["must end with the resource's type and id (/Patient/pat2)"] },
  "Bundle-3a0707d3-549e-4467-b8b8-5a2ab3800efe.json": { reason: "the fullUrl of an entry ends with Patient/pat12, its resource's id is pat2", errors: ["must end with the resource's type and id (/Patient/pat2)"] },
  "Bundle-lri-example.json": { reason: "the fullUrl of an entry ends with Observation/lri-gramstain1, its resource's id is another", errors: ["so it must end with the resource's type and id"] },
  "Bundle-bundle-search-warning.json": { reason: "a searchset entry without a fullUrl", errors: ["each entry of a Bundle must have a fullUrl"] },
  "Observation-example-genetics-brcapat.json": { reason: "uses the US Core ethnicity extension, which R4 does not define (the reference validator: the extension could not be found)", errors: ["Unknown extension http://hl7.org/fhir/us/core/StructureDefinition/us-core-ethnicity"] },
  "Bundle-hla-1.json": { reason: "a glstring sub-extension 'uri' where the definition has 'url' (the reference validator: sub-extension url not defined)", errors: ["The sub-extension url 'uri' is not defined"] },
  "Bundle-valueset-expansions.json": { reason: "an expansion parameter urn:oid:...|4.0.1 (a version appended to an OID), and translation extensions on ValueSet.expansion.contains, whose contexts are string, code and markdown (the reference validator: not allowed here)", errors: ["OIDs must be valid (1.2.36.1.2001.1001.101.104.16592|4.0.1)", "translation is not allowed on ValueSet.expansion.contains"] },
  "CodeSystem-dicom-dcim.json": { reason: "valueset-concept-comments on CodeSystem.concept, whose context is ValueSet.compose.include.concept (the reference validator: not allowed here)", errors: ["valueset-concept-comments is not allowed on CodeSystem.concept"] }
}

/** The ten extension search parameters of CodeSystem and ValueSet that R4 published without a base. */
export const withoutBase = /^SearchParameter-(codesystem|valueset)-extensions-/
export const withoutBaseDefect: Defect = { reason: "published without a base", errors: ["SearchParameter.base: minimum required = 1"] }


/** Examples whose references name a resource type their element does not allow (refused under either reference policy). */
export const referenceTypeDefects: Readonly<Record<string, string>> = {
  "DeviceMetric-example.json": "parent refers to a DeviceDefinition; DeviceMetric.parent is Reference(Device)",
  "DeviceUseStatement-example.json": "reasonReference refers to a Procedure, which it does not allow",
  "MedicationRequest-medrx0301.json": "dispenseRequest.performer refers to something other than an Organization",
  "Observation-clinical-gender.json": "performer refers to an Encounter, which it does not allow"
}

/**
 * Examples refused where the terminology package (hl7.terminology) is installed, as on a server: their codes
 * are not in the version of the code system that package holds, which replaces R4's own.
 */
export const terminologyDefects: Readonly<Record<string, string>> = {
  "AdverseEvent-example.json": "category 'product-use-error' is not in adverse-event-category 2.0.0",
  "Immunization-subpotent.json": "subpotentReason 'partial' is not in immunization-subpotent-reason 1.0.1",
  "ImmunizationEvaluation-notValid.json": "doseStatusReason 'outsidesched' is not in immunization-evaluation-dose-status-reason 1.0.1"
}
