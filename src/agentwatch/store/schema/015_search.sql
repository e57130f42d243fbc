-- Search across the whole history (`agentwatch search`, the dashboard's search): a text index on
-- the event's one-line text and on its payload (the hook's JSON, after redaction).
--
-- A text index (an inverted index: ClickHouse 26.2 and later) maps each word to the rows that
-- hold it: the words are split at every character that is not a letter or a digit, lower-cased
-- (the preprocessor). `hasAllTokens(text, 'make test')` reads the rows that hold both words, so a
-- rare word costs a few granules at any size of history, not a scan (docs/queries.md, "search").
-- An n-gram bloom filter (ngrambf_v1) finds parts of words too, but one filter per granule of
-- 8,192 payloads saturates and stops skipping; the words' posting lists do not.
--
-- Events stored before this file was applied are indexed by the MATERIALIZE INDEX mutations at
-- the end, in the background (on a cluster, run them by hand on events_local); until they are
-- done, those parts are read in full: the same answer, slower.
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_text_words text TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(text));
ALTER TABLE events ADD INDEX IF NOT EXISTS idx_data_words data TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(data));
ALTER TABLE events MATERIALIZE INDEX idx_text_words;
ALTER TABLE events MATERIALIZE INDEX idx_data_words;
