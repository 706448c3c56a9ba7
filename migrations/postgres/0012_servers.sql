-- One row per running server: its heartbeat. Servers that share the rate limits without a configured
-- `rate_limit.servers` count the rows seen lately and each take an equal part (src/governance/Fleet.ts).
CREATE TABLE svc_servers (
  server_id TEXT PRIMARY KEY,
  seen_at BIGINT NOT NULL
);
