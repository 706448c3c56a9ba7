-- The search index's lookup indexes end in `rkey`, so a search reads the matching resources' keys from
-- the index alone: without it, every match cost a seek into the table to read `rkey` (on SQLite about
-- a third of a token search's statement). Each replaces the index of the same name; nothing else changes.
DROP INDEX search_token_lookup;
CREATE INDEX search_token_lookup ON search_token (type, param, value, system, rkey);
DROP INDEX search_string_lookup;
CREATE INDEX search_string_lookup ON search_string (type, param, normalized, rkey);
DROP INDEX search_date_lookup;
CREATE INDEX search_date_lookup ON search_date (type, param, low, high, rkey);
DROP INDEX search_number_lookup;
CREATE INDEX search_number_lookup ON search_number (type, param, value, rkey);
DROP INDEX search_quantity_lookup;
CREATE INDEX search_quantity_lookup ON search_quantity (type, param, value, rkey);
DROP INDEX search_reference_lookup;
CREATE INDEX search_reference_lookup ON search_reference (type, param, target_id, target_type, rkey);
DROP INDEX search_reference_target;
CREATE INDEX search_reference_target ON search_reference (target_type, target_id, rkey);
DROP INDEX search_uri_lookup;
CREATE INDEX search_uri_lookup ON search_uri (type, param, value, rkey);
DROP INDEX search_compartment_lookup;
CREATE INDEX search_compartment_lookup ON search_compartment (compartment, target_id, type, rkey);
