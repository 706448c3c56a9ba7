-- The stored request log (request_log.store; GET /_requests): one row per completed request, written in
-- batches off the request path and deleted after request_log.retention_hours. `time` is the completion in
-- milliseconds since the epoch; (time, id) orders the rows newest first and is the paging cursor.
CREATE TABLE svc_request_log (
  id INTEGER PRIMARY KEY,
  time INTEGER NOT NULL,
  request_id TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  status INTEGER NOT NULL,
  duration_ms REAL NOT NULL,
  client TEXT NOT NULL,
  caller TEXT NOT NULL,
  interaction TEXT NOT NULL,
  resource_type TEXT,
  cost TEXT NOT NULL,
  bytes_in INTEGER,
  bytes_out INTEGER,
  aborted INTEGER NOT NULL
);
CREATE INDEX svc_request_log_time ON svc_request_log (time, id);
