-- Compartment membership (https://hl7.org/fhir/R4/compartmentdefinition.html): one row per compartment
-- a resource's current version is in, written with its other index rows (src/search/IndexWriter.ts).
-- `compartment` is the CompartmentDefinition's code (Patient, Encounter, ...) and `target_id` the id of
-- the focal resource. Compartment search, `$everything` and a patient-scoped token read the first index.
CREATE TABLE search_compartment (
  rkey INTEGER NOT NULL,
  type TEXT NOT NULL,
  compartment TEXT NOT NULL,
  target_id TEXT NOT NULL
);
CREATE INDEX search_compartment_lookup ON search_compartment (compartment, target_id, type);
CREATE INDEX search_compartment_rkey ON search_compartment (rkey);
