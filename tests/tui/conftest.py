"""The real services this layer's tests run against (tests/services.py)."""

from tests.services import chdb_database, chdb_engine, collector_for, nats_server, shared_nats

__all__ = ["chdb_database", "chdb_engine", "collector_for", "nats_server", "shared_nats"]
