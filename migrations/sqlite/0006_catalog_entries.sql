-- What the catalog keeps of each current conformance resource (src/catalog/stored.ts): the summary it
-- builds the definition from (JSON, in the shape numbered `format`) and the resource's JSON text deflated,
-- unpacked when a snapshot, a code system's concepts or a value set's compose is first needed. Written
-- when a catalog is built and finds a current version without one; rows of older versions are removed then.
CREATE TABLE catalog_entries (
  rkey INTEGER NOT NULL,
  version INTEGER NOT NULL,
  format INTEGER NOT NULL,
  summary TEXT NOT NULL,
  packed BLOB NOT NULL,
  PRIMARY KEY (rkey, version)
);
