-- Bulk Data export jobs (docs/export.md, src/export/): one row per `$export` kick-off. The server that holds the
-- writer lease works on them: `lease_holder` took the job under its writer-lease `lease_epoch` until
-- `lease_expires` (milliseconds since the epoch), renewed while it works; `starts` counts how often it was taken
-- (3 starts without finishing fail it). `spec` is what to export (JSON), `caller` whose grants bound it (JSON),
-- `progress` the last checkpoint: the type being written, the last id written, and every file with its length.
CREATE TABLE svc_export_jobs (
  id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  caller TEXT NOT NULL,
  state TEXT NOT NULL,
  request TEXT NOT NULL,
  spec TEXT NOT NULL,
  transaction_ts BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  finished_at BIGINT,
  starts INTEGER NOT NULL DEFAULT 0,
  lease_holder TEXT,
  lease_epoch BIGINT,
  lease_expires BIGINT,
  progress TEXT NOT NULL,
  message TEXT
);

CREATE INDEX svc_export_jobs_state ON svc_export_jobs (state, created_at);
