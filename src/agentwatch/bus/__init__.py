"""NATS through nats-py: the one place that builds a connection, the stream and consumer
definitions, the query client and the dashboard's live subscription."""
