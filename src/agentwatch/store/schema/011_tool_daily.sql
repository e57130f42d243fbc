-- tool_daily: tool_hourly folded into UTC days, for the per-tool answers over all time. Summed
-- over every hour, tool_hourly's duration states hold up to a thousand durations per hour and
-- tool before they turn into fixed histograms, so "all" cost in proportion to the events (at 10M
-- events, 38 ms against 14 ms at 1M; 85 ms at 30M). A day's state is past that size at a few
-- thousand results, so "all" reads one row per day and tool whatever the events: 15 ms at 1M,
-- 10M and 30M (docs/benchmarks.md).
--
-- Its view reads tool_hourly's inserted rows (the partial states of each insert), so it sees what
-- tool_hourly sees: the events the writer let through (store/writes.py keeps redeliveries out).
CREATE TABLE IF NOT EXISTS tool_daily
(
    day Date,
    tool LowCardinality(String),
    calls SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    interrupted SimpleAggregateFunction(sum, UInt64),
    denied SimpleAggregateFunction(sum, UInt64),
    finished SimpleAggregateFunction(sum, UInt64),
    timed SimpleAggregateFunction(sum, UInt64),
    durations AggregateFunction(quantilesTiming(0.5, 0.95), Int64),
    max_ms SimpleAggregateFunction(max, Nullable(Int64)),
    last_error AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (day, tool);

CREATE MATERIALIZED VIEW IF NOT EXISTS tool_daily_mv TO tool_daily AS
SELECT
    toDate(hour) AS day,
    tool,
    sum(calls) AS calls,
    sum(failures) AS failures,
    sum(interrupted) AS interrupted,
    sum(denied) AS denied,
    sum(finished) AS finished,
    sum(timed) AS timed,
    quantilesTimingMergeState(0.5, 0.95)(durations) AS durations,
    max(max_ms) AS max_ms,
    argMaxMergeState(last_error) AS last_error
FROM tool_hourly
GROUP BY day, tool;

-- The backfill: the days of what tool_hourly holds.
INSERT INTO tool_daily
SELECT
    toDate(hour) AS day,
    tool,
    sum(calls) AS calls,
    sum(failures) AS failures,
    sum(interrupted) AS interrupted,
    sum(denied) AS denied,
    sum(finished) AS finished,
    sum(timed) AS timed,
    quantilesTimingMergeState(0.5, 0.95)(durations) AS durations,
    max(max_ms) AS max_ms,
    argMaxMergeState(last_error) AS last_error
FROM tool_hourly
GROUP BY day, tool;

-- tool_stats keeps its columns; its window 'all' now reads tool_daily, the others tool_hourly.
CREATE OR REPLACE VIEW tool_stats AS
SELECT
    window, tool, sum(calls) AS calls, sum(failures) AS failures,
    sum(interrupted) AS interrupted, sum(denied) AS denied, sum(finished) AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    sum(timed) AS timed,
    quantilesTimingMerge(0.5, 0.95)(durations) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms,
    if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    max(max_ms) AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxMerge(last_error) AS last_error
FROM
(
    SELECT w.window AS window, tool, calls, failures, interrupted, denied, finished, timed, durations,
        max_ms, last_error
    FROM tool_hourly
    INNER JOIN
    (
        SELECT arrayJoin([('1h', 3600), ('1d', 86400), ('7d', 604800)]) AS w_pair,
            w_pair.1 AS window, w_pair.2 AS seconds
    ) AS w ON 1 = 1
    WHERE hour >= toStartOfHour(now() - toIntervalSecond(w.seconds))
    UNION ALL
    SELECT 'all' AS window, tool, calls, failures, interrupted, denied, finished, timed, durations,
        max_ms, last_error
    FROM tool_daily
)
GROUP BY window, tool;
