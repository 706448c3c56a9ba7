-- The audit trail (src/governance/audit/): one row per AuditEvent, in one hash chain per database. `seq`
-- numbers the rows without gaps; `hash` is the HMAC (or plain SHA-256 without SVC_AUDIT_KEY) over the previous
-- row's hash, `seq` and `event`, the AuditEvent's JSON text. The other columns are what `GET /_audit` filters
-- on, read from `event` (verification checks they still say what it says). `time` is milliseconds since the epoch.
CREATE TABLE svc_audit (
  seq BIGINT PRIMARY KEY,
  time BIGINT NOT NULL,
  kind TEXT NOT NULL,
  action TEXT NOT NULL,
  outcome TEXT NOT NULL,
  agent TEXT NOT NULL,
  client TEXT,
  entity TEXT,
  event TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX svc_audit_time ON svc_audit (time, seq);
CREATE INDEX svc_audit_agent ON svc_audit (agent, seq);
CREATE INDEX svc_audit_entity ON svc_audit (entity, seq);

-- The chain's one head row: the last row appended (an append locks this row, so that every server appends to
-- the one chain), and the cut, the last row retention deleted (0 and '' before any), where verification starts.
CREATE TABLE svc_audit_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last_seq BIGINT NOT NULL,
  last_hash TEXT NOT NULL,
  cut_seq BIGINT NOT NULL,
  cut_hash TEXT NOT NULL
);
INSERT INTO svc_audit_head (id, last_seq, last_hash, cut_seq, cut_hash) VALUES (1, 0, '', 0, '');
