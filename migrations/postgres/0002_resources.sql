-- One row per resource, pointing at its current version. rkey is the internal key that index tables use.
CREATE TABLE resources (
  rkey BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type TEXT NOT NULL,
  id TEXT NOT NULL,
  version INTEGER NOT NULL,
  commit_ts BIGINT NOT NULL,
  deleted BOOLEAN NOT NULL DEFAULT FALSE,
  UNIQUE (type, id)
);

-- Every version of every resource, deletes included, with the JSON text as served (NULL for a delete).
-- Text, not JSONB: JSONB reorders keys, and reads serve these bytes as they are.
-- Ordered by commit_ts it is the change log that history, subscriptions and replicas follow.
CREATE TABLE resource_versions (
  rkey BIGINT NOT NULL,
  version INTEGER NOT NULL,
  commit_ts BIGINT NOT NULL,
  op TEXT NOT NULL,
  content TEXT,
  PRIMARY KEY (rkey, version)
);

CREATE INDEX resource_versions_commit_ts ON resource_versions (commit_ts);

-- Installed FHIR packages.
CREATE TABLE svc_packages (
  name TEXT NOT NULL,
  version TEXT NOT NULL,
  source TEXT NOT NULL,
  checksum TEXT NOT NULL,
  substituted_from TEXT,
  resources INTEGER NOT NULL,
  commit_ts BIGINT NOT NULL,
  installed_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (name, version)
);
