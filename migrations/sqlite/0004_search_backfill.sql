-- What the search index was built for (src/search/Backfill.ts). One row per resource type: the
-- fingerprint of the search parameters that type's index rows were extracted with.
CREATE TABLE search_index_types (
  type TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL
);

-- The backfill's record, one row. Resources installed by packages committed up to `packages_ts` are
-- indexed. `job` names the backfill under way (NULL when none); `last_rkey` is the last resource it
-- finished, written in the same transaction as that resource's index rows.
CREATE TABLE search_backfill (
  id INTEGER PRIMARY KEY,
  packages_ts INTEGER NOT NULL,
  job TEXT,
  last_rkey INTEGER NOT NULL
);
INSERT INTO search_backfill (id, packages_ts, job, last_rkey) VALUES (1, 0, NULL, 0);
