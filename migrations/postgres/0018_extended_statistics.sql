-- Planner statistics (docs/database.md, "Planner statistics").
-- Postgres estimates a condition on several columns as if they were independent: `type = 'Observation' AND
-- param = 'code' AND value = '8302-2' AND system = 'http://loinc.org'` multiplies four shares, though the code
-- alone decides the rest. On the Synthea data loaded ten times it estimated 155 rows where 4,870 match, and a
-- search with a date as well was planned as "every match, then sort" (33 ms) rather than "in order, up to the
-- page" (2 ms). The most common combinations of the four columns, sampled with the table, correct that.
CREATE STATISTICS IF NOT EXISTS search_token_columns (mcv) ON type, param, value, system FROM search_token;
CREATE STATISTICS IF NOT EXISTS search_uri_columns (mcv) ON type, param, value FROM search_uri;
-- No query filters on these columns: their statistics cost ANALYZE time (a version's JSON is read whole to
-- sample it) and serve no plan.
ALTER TABLE resource_versions ALTER COLUMN content SET STATISTICS 0;
ALTER TABLE svc_audit ALTER COLUMN event SET STATISTICS 0;
ALTER TABLE svc_audit ALTER COLUMN prev_hash SET STATISTICS 0;
ALTER TABLE svc_audit ALTER COLUMN hash SET STATISTICS 0;
