/**
 * The resources of hl7.fhir.r4.examples@4.0.1 that the validator rejects, each a defect of the published
 * resource, with what is wrong (test/validation/examples.test.ts reports them; the REST tests expect 422).
 */

export const defects: Readonly<Record<string, string>> = {
  "ActivityDefinition-blood-tubes-supply.json": "empty narrative (txt-2)",
  "ActivityDefinition-heart-valve-replacement.json": "empty narrative (txt-2)",
  "EventDefinition-example.json": "empty narrative (txt-2)",
  "Questionnaire-zika-virus-exposure-assessment.json": "narrative of whitespace only (txt-2)",
  "ImagingStudy-example-xr.json": "SNOMED RT code T-15460 given as SNOMED CT",
  "PlanDefinition-example-cardiology-os.json": "the placeholder 'look up value' given as a SNOMED CT code",
  "NutritionOrder-enteralcontinuous.json": "SNOMED CT id 6547210000124112 with a wrong check digit",
  "ImplementationGuide-fhir.json": "no name and no status (both required)",
  "ig-r4.json": "no name and no status (both required)",
  "Bundle-dataelements.json": "the same fullUrl on several entries (bdl-7)",
  "Bundle-valuesets.json": "the SNOMED CT CodeSystem declares the property code 'Laterality' twice",
  "Bundle-10bb101f-a121-4264-a920-67be9cb82c74.json": "the fullUrl of an entry ends with Patient/pat12, its resource's id is pat2",
  "Bundle-3a0707d3-549e-4467-b8b8-5a2ab3800efe.json": "the fullUrl of an entry ends with Patient/pat12, its resource's id is pat2",
  "Bundle-bundle-search-warning.json": "a searchset entry without a fullUrl",
  "Bundle-lri-example.json": "the fullUrl of an entry ends with Observation/lri-gramstain1, its resource's id is another",
  "Questionnaire-qs1.json": "items without linkId (required)",
  "CodeSystem-snomedct.json": "declares the property code 'Laterality' twice",
  "StructureDefinition-Definition.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-Event.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-FiveWs.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-Request.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json": "an id longer than 64 characters",
  "Bundle-resources.json": "the Consent definition's Identifier example has system urn:ietf:rfc:3986 and a value that is not a URI",
  "StructureDefinition-Consent.json": "an Identifier example has system urn:ietf:rfc:3986 and a value that is not a URI",
  "Organization-2.16.840.1.113883.19.5.json": "identifier with system urn:ietf:rfc:3986 and a bare OID as value (not a URI)",
  "CapabilityStatement-example.json": "url urn:uuid: with an uppercase UUID",
  "TerminologyCapabilities-example.json": "url urn:uuid: with an uppercase UUID",
  "Library-zika-virus-intervention-logic.json": "value sets given as the placeholder urn:oid:X.Y.Z, not an OID",
  "CapabilityStatement-knowledge-repository.json": "search parameters stated as string whose definitions (Library-version...) are of type token",
  "CapabilityStatement-measure-processor.json": "the search parameter Measure-version stated as string; its definition is of type token",
  "CapabilityStatement-terminology-server.json": "search parameters stated with types other than their definitions' (ValueSet-reference is uri, ConceptMap-source reference)",
  "ImplementationGuide-example.json": "url under http://hl7.org/fhir/ without the standards-status and work-group extensions a guide HL7 publishes states",
  "SearchParameter-example-extension.json": "the expression is on DocumentReference while the base is Patient",
  "StructureDefinition-example-composition.json": "kind complex-type while its base Composition is a resource",
  "StructureDefinition-example-section-library.json": "kind complex-type while its base Composition is a resource",
  "ValueSet-example-hierarchical.json": "compose.include.system '#hacked' is a local reference, not an absolute URI",
  "Observation-example-genetics-brcapat.json": "uses the US Core ethnicity extension, which R4 does not define (the reference validator: the extension could not be found)",
  "Bundle-hla-1.json": "a glstring sub-extension 'uri' where the definition has 'url' (the reference validator: sub-extension url not defined)",
  "Bundle-valueset-expansions.json": "an expansion parameter urn:oid:...|4.0.1 (a version appended to an OID in a uri), and translation extensions on ValueSet.expansion.contains, whose contexts are string, code and markdown (the reference validator: not allowed here)",
  "CodeSystem-dicom-dcim.json": "valueset-concept-comments on CodeSystem.concept, whose context is ValueSet.compose.include.concept (the reference validator: not allowed here)"
}

/** The ten extension search parameters of CodeSystem and ValueSet that R4 published without a base. */
export const withoutBase = /^SearchParameter-(codesystem|valueset)-extensions-/


/** Examples whose references name a resource type their element does not allow (refused under either reference policy). */
export const referenceTypeDefects: Readonly<Record<string, string>> = {
  "DeviceMetric-example.json": "parent refers to a DeviceDefinition; DeviceMetric.parent is Reference(Device)",
  "DeviceUseStatement-example.json": "reasonReference refers to a Procedure, which it does not allow",
  "MedicationRequest-medrx0301.json": "dispenseRequest.performer refers to something other than an Organization",
  "Observation-clinical-gender.json": "performer refers to an Encounter, which it does not allow"
}
