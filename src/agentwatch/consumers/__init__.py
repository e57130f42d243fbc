"""FastStream services on the bus: the store and the live feed."""
