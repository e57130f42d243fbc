-- Messages the store can never insert (not an envelope, an unsupported version, rejected by
-- ClickHouse row by row): kept with the reason, so nothing vanishes silently.
CREATE TABLE IF NOT EXISTS dead_letters
(
    received_at DateTime64(3, 'UTC') DEFAULT now64(3),
    subject String,
    stream_seq UInt64,                        -- the JetStream stream sequence of the message
    deliveries UInt32,                        -- how many times it was delivered before giving up
    reason String,
    body String CODEC(ZSTD(3))                -- the message body, UTF-8 (invalid bytes replaced)
)
ENGINE = MergeTree
ORDER BY received_at;
