"""FastStream services on the bus, wired in app.py: the store (events into ClickHouse) and the
query service."""
