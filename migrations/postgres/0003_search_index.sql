-- Search index: one table per search parameter type, rows keyed by the resource's rkey and written in
-- the same transaction as the version they index. `type` and `param` (the parameter's code) lead every
-- lookup index, so a search on one parameter of one type reads only its own rows.
CREATE TABLE search_token (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  system TEXT,
  value TEXT,
  display TEXT,
  type_system TEXT,
  type_code TEXT
);
CREATE INDEX search_token_lookup ON search_token (type, param, value, system);
CREATE INDEX search_token_rkey ON search_token (rkey);

CREATE TABLE search_string (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  normalized TEXT NOT NULL,
  exact TEXT NOT NULL
);
CREATE INDEX search_string_lookup ON search_string (type, param, normalized);
CREATE INDEX search_string_rkey ON search_string (rkey);

CREATE TABLE search_date (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  low BIGINT NOT NULL,
  high BIGINT NOT NULL
);
CREATE INDEX search_date_lookup ON search_date (type, param, low, high);
CREATE INDEX search_date_rkey ON search_date (rkey);

CREATE TABLE search_number (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  low DOUBLE PRECISION NOT NULL,
  high DOUBLE PRECISION NOT NULL
);
CREATE INDEX search_number_lookup ON search_number (type, param, value);
CREATE INDEX search_number_rkey ON search_number (rkey);

CREATE TABLE search_quantity (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  system TEXT,
  unit TEXT,
  canonical_value DOUBLE PRECISION,
  canonical_unit TEXT
);
CREATE INDEX search_quantity_lookup ON search_quantity (type, param, value);
CREATE INDEX search_quantity_canonical ON search_quantity (type, param, canonical_unit, canonical_value);
CREATE INDEX search_quantity_rkey ON search_quantity (rkey);

CREATE TABLE search_reference (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  target_type TEXT,
  target_id TEXT,
  url TEXT,
  version TEXT,
  identifier_system TEXT,
  identifier_value TEXT
);
CREATE INDEX search_reference_lookup ON search_reference (type, param, target_id, target_type);
CREATE INDEX search_reference_target ON search_reference (target_type, target_id);
CREATE INDEX search_reference_url ON search_reference (type, param, url);
CREATE INDEX search_reference_rkey ON search_reference (rkey);

CREATE TABLE search_uri (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  value TEXT NOT NULL
);
CREATE INDEX search_uri_lookup ON search_uri (type, param, value);
CREATE INDEX search_uri_rkey ON search_uri (rkey);

-- A composite value: its parts as JSON, matched part by part.
CREATE TABLE search_composite (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  parts TEXT NOT NULL
);
CREATE INDEX search_composite_lookup ON search_composite (type, param);
CREATE INDEX search_composite_rkey ON search_composite (rkey);

CREATE TABLE search_near (
  rkey BIGINT NOT NULL,
  type TEXT NOT NULL,
  param TEXT NOT NULL,
  latitude DOUBLE PRECISION NOT NULL,
  longitude DOUBLE PRECISION NOT NULL
);
CREATE INDEX search_near_lookup ON search_near (type, param, latitude, longitude);
CREATE INDEX search_near_rkey ON search_near (rkey);
