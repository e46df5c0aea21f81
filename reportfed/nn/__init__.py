"""Torch pieces both modalities share: modules <-> arrays, the masked loss, thread counts."""
