"""The ClickHouse store: schema, migrations and batch inserts of envelopes."""
