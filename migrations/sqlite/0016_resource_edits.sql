-- Changes of a version made in place, without a new version: `$meta-add` and `$meta-delete` rewrite the
-- version's meta (https://hl7.org/fhir/R4/resource-operation-meta-add.html) in its resource_versions row.
-- Each such change is a row here at the commit that made it: with resource_versions and svc_commits it is
-- the change log the change feed reads back (src/db/ChangeFeed.ts), so that followers reading the log (a
-- replica, a follower that fell behind, a resumed live query) see it as those in the process do.
CREATE TABLE resource_edits (
  commit_ts INTEGER NOT NULL,
  rkey INTEGER NOT NULL,
  version INTEGER NOT NULL,
  PRIMARY KEY (commit_ts, rkey, version)
);
