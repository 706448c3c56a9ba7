-- Statistics over several columns of the search index together (docs/database.md, "Planner statistics").
-- Postgres estimates a condition on several columns as if they were independent: `type = 'Observation' AND
-- param = 'code' AND value = '8302-2' AND system = 'http://loinc.org'` multiplies four shares, though the code
-- alone decides the rest. On the Synthea data loaded ten times it estimated 155 rows where 4,870 match, and a
-- search with a date as well was planned as "every match, then sort" (33 ms) rather than "in order, up to the
-- page" (2 ms). The most common value combinations and the dependencies between the columns correct that.
CREATE STATISTICS IF NOT EXISTS search_token_columns (mcv, dependencies) ON type, param, value, system FROM search_token;
CREATE STATISTICS IF NOT EXISTS search_reference_columns (dependencies) ON type, param, target_type, target_id FROM search_reference;
CREATE STATISTICS IF NOT EXISTS search_uri_columns (mcv, dependencies) ON type, param, value FROM search_uri;
