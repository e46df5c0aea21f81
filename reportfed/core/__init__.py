"""The core: torch-free, typed pieces every layer above uses (errors, labels, settings, the
surgical aggregation and server step, the round loop, the node interface, files and metrics)."""
