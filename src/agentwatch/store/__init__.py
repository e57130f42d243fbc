"""ClickHouse through clickhouse-connect: the client, the schema and its migrations, the writes,
every read-side query, and the cluster schema generated from the migrations."""
