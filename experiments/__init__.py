"""The papers' experiments and the ones beyond them (``python -m experiments NAME``)."""

#: every experiment ``python -m experiments`` runs, in the README's order
EXPERIMENTS = (
    "paper",
    "nodes",
    "shared",
    "noniid",
    "embeddings",
    "vocab",
    "psi",
    "size",
    "beyond",
    "sentence",
    "consortium",
    "styles",
    "gap",
)
