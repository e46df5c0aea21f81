"""The report model's forward pass in NumPy: presence probabilities, and the sentence behind each,
from a :class:`~reportfed.core.aggregation.GlobalState`.

Labelling runs here, so loading a model and labelling reports never imports torch (about 1.5 s
of every ``reportfed label``); training runs the same model in torch (:mod:`reportfed.text.model`),
and a test holds the two passes equal. The weights are the arrays the aggregation core merges:
the representation's ``Linear`` layers as ``"<index>.weight"`` / ``"<index>.bias"`` (ReLU after
each; dropout is off when labelling), the task block's ``weight``, ``bias`` and, with the skip
connection, ``skip`` (labels x input).
"""

from __future__ import annotations

import numpy as np

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig

#: reports scored at once (bounds the memory of a long list of sentence bags)
BATCH = 4096


def _layers(state: GlobalState) -> list[tuple[np.ndarray, np.ndarray]]:
    """The representation's (weight, bias) pairs in order."""
    indices = sorted({int(key.split(".")[0]) for key in state.shared})
    return [
        (np.asarray(state.shared[f"{i}.weight"]), np.asarray(state.shared[f"{i}.bias"]))
        for i in indices
    ]


def check_architecture(state: GlobalState, input_dim: int, config: FederationConfig) -> None:
    """Raise ValueError unless ``state``'s arrays are the model ``config`` describes on inputs of
    ``input_dim`` (hidden widths, skip connection, one output per label)."""
    shapes = {k: np.shape(v) for k, v in state.shared.items()}
    width, expected = input_dim, dict[str, tuple[int, ...]]()
    for i, h in enumerate(config.hidden):
        expected |= {f"{3 * i}.weight": (h, width), f"{3 * i}.bias": (h,)}
        width = h
    task = {"weight": (len(state.labels), width), "bias": (len(state.labels),)}
    if config.skip:
        task["skip"] = (len(state.labels), input_dim)
    given = {k: np.shape(v) for k, v in state.task.items()}
    if shapes != expected or given != task:
        raise ValueError(f"weights {shapes} / {given} are not the architecture {expected} / {task}")


def _logits(
    state: GlobalState, layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray
) -> np.ndarray:
    """Logits ``(m, labels)`` of single vectors ``x`` ``(m, dim)``."""
    h = x
    for weight, bias in layers:
        h = np.maximum(h @ weight.T + bias, 0)
    out = h @ np.asarray(state.task["weight"]).T + np.asarray(state.task["bias"])
    if "skip" in state.task:
        out += x @ np.asarray(state.task["skip"]).T
    return out


def sentence_logits(state: GlobalState, x: np.ndarray) -> np.ndarray:
    """Logits of ``x``: ``(n, labels)`` for vectors ``(n, dim)``, ``(n, S, labels)`` for sentence
    bags ``(n, S, dim)``, whose all-zero rows (padding) get ``-inf``."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    layers = _layers(state)
    if x.ndim == 2:
        return _logits(state, layers, x)
    mask = (x != 0).any(-1)
    out = np.full((*mask.shape, len(state.labels)), -np.inf, dtype=np.float32)
    out[mask] = _logits(state, layers, x[mask])
    return out


def predict_state(state: GlobalState, x: np.ndarray) -> np.ndarray:
    """Presence probabilities ``(n, labels)`` of the model with weights ``state`` on embeddings
    ``x``: the sigmoid of the logit of each report, or of the largest logit over its sentences
    for bags (multiple-instance max pooling; a report without a sentence gets 0)."""
    out = np.empty((len(x), len(state.labels)), dtype=np.float32)
    for start in range(0, len(x), BATCH):
        logits = sentence_logits(state, x[start : start + BATCH])
        if logits.ndim == 3:
            logits = logits.max(axis=1)
        with np.errstate(over="ignore"):
            out[start : start + BATCH] = 1 / (1 + np.exp(-logits))
    return out


def decisive_sentences(state: GlobalState, x: np.ndarray) -> np.ndarray:
    """Per report and label ``(n, labels)``, the index of the sentence whose logit max pooling
    takes (the sentence behind the presence probability) in sentence bags ``x``."""
    if not len(x):
        return np.zeros((0, len(state.labels)), dtype=np.int64)
    return np.concatenate(
        [
            sentence_logits(state, x[start : start + BATCH]).argmax(axis=1)
            for start in range(0, len(x), BATCH)
        ]
    )
