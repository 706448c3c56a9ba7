-- Index keys of bounded length (src/search/indexKey.ts): the text columns the lookup indexes cover hold
-- the text up to 256 code points, else its first 256 and an ellipsis, and the whole text goes to a
-- `_full` column, NULL for a text that fits. A Postgres index entry cannot hold a text of some 2.7 KB or
-- more; SQLite takes the same shape so that both stores answer alike. Existing long texts are cut here.
ALTER TABLE search_token ADD COLUMN system_full TEXT;
ALTER TABLE search_token ADD COLUMN value_full TEXT;
ALTER TABLE search_string ADD COLUMN normalized_full TEXT;
ALTER TABLE search_uri ADD COLUMN value_full TEXT;
UPDATE search_token SET value_full = value, value = left(value, 256) || '…' WHERE char_length(value) > 256;
UPDATE search_token SET system_full = system, system = left(system, 256) || '…' WHERE char_length(system) > 256;
UPDATE search_string SET normalized_full = normalized, normalized = left(normalized, 256) || '…' WHERE char_length(normalized) > 256;
UPDATE search_uri SET value_full = value, value = left(value, 256) || '…' WHERE char_length(value) > 256;
