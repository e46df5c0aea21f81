"""Simulated node splits: rows across nodes (IID) and labels across nodes (shared vs unique)."""

from __future__ import annotations

import numpy as np

from reportfed.core.errors import ConfigError
from reportfed.core.labels import LabelSpace


def iid_rows(n_rows: int, n_nodes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle rows and cut them into ``n_nodes`` equal-size chunks (sizes differ by at most one)."""
    if not 1 <= n_nodes <= n_rows:
        raise ConfigError(f"nodes must be in [1, {n_rows}] (a report each at least), got {n_nodes}")
    return [np.sort(chunk) for chunk in np.array_split(rng.permutation(n_rows), n_nodes)]


def split_labels(
    labels: LabelSpace, n_nodes: int, n_shared: int, rng: np.random.Generator
) -> list[LabelSpace]:
    """The papers' label assignment: shuffle labels, the first ``n_shared`` go to every node, the
    rest are split disjointly (as evenly as possible) over the nodes.

    Each node's space keeps the order of ``labels``.
    """
    if not 0 <= n_shared <= len(labels):
        raise ConfigError(f"shared labels must be in [0, {len(labels)}], got {n_shared}")
    unique = len(labels) - n_shared
    if n_nodes > 1 and unique < n_nodes and n_shared == 0:
        raise ConfigError(f"{unique} labels cannot give each of {n_nodes} nodes a label")
    order = list(rng.permutation(len(labels)))
    shared, rest = order[:n_shared], order[n_shared:]
    parts = np.array_split(np.array(rest, dtype=int), n_nodes)
    return [LabelSpace(tuple(labels[i] for i in sorted(shared + part.tolist()))) for part in parts]


#: the share of reports a train/test split holds out for test (the experiments' protocol)
TEST_FRACTION = 0.2


def split_rows(
    n_rows: int, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows, held-out rows), sorted: a random ``fraction`` of ``n_rows`` held out. The one
    row splitter: train/test splits, and every site's validation rows
    (:func:`validation_split`)."""
    perm = rng.permutation(n_rows)
    n_held = round(n_rows * fraction)
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def validation_split(n_rows: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A site's (training rows, held-out rows) of its ``n_rows``: a random ``val_fraction`` held
    out, drawn from a generator of its own seeded with ``seed``, so that the same table and seed
    give the same rows in process and on Flower."""
    return split_rows(n_rows, val_fraction, np.random.default_rng(seed))


def site_splits(
    site: np.ndarray, val_fraction: float, seed: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per site named in ``site`` (each row's site), in sorted name order: its (training rows,
    held-out rows) among all rows, each site's drawn from its own rows by
    :func:`validation_split`."""
    out = {}
    for name in sorted(set(site.tolist())):
        rows = np.flatnonzero(site == name)
        kept, held = validation_split(len(rows), val_fraction, seed)
        out[name] = (rows[kept], rows[held])
    return out


def dirichlet_rows(
    y: np.ndarray, n_nodes: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Label-skewed node splits: each row is keyed by one of its positive labels (a random one;
    "no finding" for none) and every key's rows are spread over the nodes by proportions drawn from
    Dirichlet(``alpha``). Small ``alpha`` gives nodes very different label prevalences; large
    ``alpha`` approaches IID. Every node gets at least one row."""
    if alpha <= 0:
        raise ConfigError(f"alpha must be > 0, got {alpha}")
    positives = np.nan_to_num(y) > 0
    keys = np.array(
        [rng.choice(np.flatnonzero(r)) if r.any() else y.shape[1] for r in positives], dtype=int
    )
    node = np.empty(len(y), dtype=int)
    for key in np.unique(keys):
        rows = rng.permutation(np.flatnonzero(keys == key))
        cuts = (np.cumsum(rng.dirichlet(np.full(n_nodes, alpha)))[:-1] * len(rows)).astype(int)
        for k, part in enumerate(np.split(rows, cuts)):
            node[part] = k
    for k in range(n_nodes):  # a node left empty takes a random row from the largest one
        if not (node == k).any():
            biggest = np.bincount(node, minlength=n_nodes).argmax()
            node[rng.choice(np.flatnonzero(node == biggest))] = k
    return [np.flatnonzero(node == k) for k in range(n_nodes)]
