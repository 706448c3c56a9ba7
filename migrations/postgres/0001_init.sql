-- The migration runner's own tables.
CREATE TABLE svc_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  checksum TEXT NOT NULL,
  build_version TEXT NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL
);

-- Facts about the database itself: fhir_version (pinned), created_by_build.
CREATE TABLE svc_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
