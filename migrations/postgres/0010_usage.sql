-- Metering (src/governance/Metering.ts): what each caller asked, per UTC day and class of request. Every
-- server adds its counts to the same rows (an upsert that adds), so the table is the fleet's usage. `client`
-- is the caller key (`client:<id>[/user:<user>]`, `address:<address>`, or `other` for counts folded when a
-- server held too many callers at once); `refused` counts 429 answers, which the other counters leave out.
CREATE TABLE svc_usage (
  day TEXT NOT NULL,
  client TEXT NOT NULL,
  class TEXT NOT NULL,
  requests BIGINT NOT NULL DEFAULT 0,
  refused BIGINT NOT NULL DEFAULT 0,
  bytes_in BIGINT NOT NULL DEFAULT 0,
  bytes_out BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (day, client, class)
);
-- A client's totals for its day and month (quotas).
CREATE INDEX svc_usage_client_day ON svc_usage (client, day);
