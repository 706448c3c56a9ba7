-- One row per commit that changed resources: who made it and in answer to which request. With
-- resource_versions (by commit_ts) it is the durable change log the change feed reads back
-- (src/store/ChangeFeed.ts): a follower that fell behind, and a process that follows another's writes.
CREATE TABLE svc_commits (
  commit_ts BIGINT PRIMARY KEY,
  actor TEXT NOT NULL,
  request_id TEXT
);
