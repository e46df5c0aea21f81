"""The node model: an MLP whose hidden layers are the *representation block* and whose output
layer (one sigmoid output per label) is the *task block*.

Any torch module with ``representation`` and ``task`` submodules (the vision models too) converts
to and from the aggregation core's arrays with :func:`to_arrays` / :func:`load_arrays`. Training
runs here, in torch; labelling runs the same forward pass in NumPy (:mod:`reportfed.text.scoring`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from reportfed.core.aggregation import GlobalState
from reportfed.core.config import FederationConfig
from reportfed.nn.arrays import load_arrays

SKIP = "skip"  #: the task-block key of :class:`SkipHead`'s input term


class SkipHead(nn.Linear):
    """A linear head over the representation plus a linear term on the input embedding:
    ``logits = h W^T + b + x S^T``. ``skip`` (``S``, labels x input, zero at start) has the label
    axis first, so the aggregation core merges it label by label like ``weight`` and ``bias``."""

    def __init__(self, width: int, n_labels: int, input_dim: int) -> None:
        super().__init__(width, n_labels)
        self.skip = nn.Parameter(torch.zeros(n_labels, input_dim))

    def forward(self, h: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        if x is None:
            raise ValueError("SkipHead needs the input embedding")
        return super().forward(h) + x @ self.skip.T


class SeededDropout(nn.Dropout):
    """``nn.Dropout`` drawing its masks from ``generator`` when one is set (else torch's global
    generator), so seeded training touches no global state. The masks equal ``nn.Dropout``'s
    for a generator in the same state."""

    generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0 or self.generator is None:
            return super().forward(x)
        noise = torch.empty_like(x).bernoulli_(1 - self.p, generator=self.generator)
        return x * noise.div_(1 - self.p)


def seed_dropout(model: nn.Module, generator: torch.Generator | None) -> None:
    """Let every :class:`SeededDropout` of ``model`` draw from ``generator`` (``None``: the global
    generator)."""
    for module in model.modules():
        if isinstance(module, SeededDropout):
            module.generator = generator


def _seeded_init(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Initialise ``model``'s linear layers as torch does (``nn.Linear.reset_parameters``), drawing
    from ``generator``; a :class:`SkipHead`'s input term stays zero. Returns ``model``."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                bound = 1 / math.sqrt(module.in_features) if module.in_features > 0 else 0
                if module.bias is not None:
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
    return model


class ReportMLP(nn.Module):
    """``input -> [Linear, ReLU, Dropout] x len(hidden) -> Linear(n_labels)`` (logits); with
    ``skip``, the head also has a linear term on the input (:class:`SkipHead`)."""

    def __init__(
        self,
        input_dim: int,
        n_labels: int,
        hidden: Sequence[int] = (512, 256),
        dropout: float = 0.2,
        *,
        skip: bool = False,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(), SeededDropout(dropout)]
            width = h
        self.representation = nn.Sequential(*layers)
        self.task = SkipHead(width, n_labels, input_dim) if skip else nn.Linear(width, n_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, labels)`` of reports ``(n, dim)`` or of sentence bags ``(n, S, dim)``
        (all-zero rows are padding; see :func:`pool_sentences`)."""
        return pool_sentences(self.score, x) if x.dim() == 3 else self.score(x)

    def score(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of single vectors ``(m, dim)`` (reports or sentences)."""
        h = self.representation(x)
        return self.task(h, x) if isinstance(self.task, SkipHead) else self.task(h)


def sentence_mask(x: torch.Tensor) -> torch.Tensor:
    """Which rows of sentence bags ``(n, S, dim)`` are sentences (``True``) and which are the
    all-zero padding."""
    return (x != 0).any(-1)


def _sentence_logits(
    score: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    """Logits ``(n, S, labels)`` of each sentence of bags ``x`` ``(n, S, dim)``; only the real
    sentences are scored, padding gets ``-inf``."""
    mask = sentence_mask(x)
    logits = score(x[mask])
    out = logits.new_full((*mask.shape, logits.shape[-1]), float("-inf"))
    out[mask] = logits
    return out


def pool_sentences(score: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Per report and label, the largest logit over the report's sentences (multiple-instance
    learning with max pooling): a report shows a finding if one of its sentences does. Only the
    real sentences of ``x`` ``(n, S, dim)`` are scored; a report without any gets ``-inf``."""
    return _sentence_logits(score, x).amax(dim=1)


@torch.inference_mode()
def predict_proba(model: nn.Module, x: torch.Tensor, batch_size: int = 4096) -> np.ndarray:
    """Sigmoid outputs of ``model`` on ``x`` (eval mode), as a NumPy array."""
    model.eval()
    out = [torch.sigmoid(model(x[i : i + batch_size])) for i in range(0, len(x), batch_size)]
    return torch.cat(out).numpy() if out else np.zeros((0, 0), dtype=np.float32)


def node_model(
    input_dim: int, n_labels: int, config: FederationConfig, *, seed: int | None = None
) -> ReportMLP:
    """The architecture ``config`` describes, with ``n_labels`` outputs: weights drawn from a
    generator seeded with ``seed`` (the same for the same seed), else from torch's global one."""
    model = ReportMLP(input_dim, n_labels, config.hidden, config.dropout, skip=config.skip)
    if seed is not None:
        _seeded_init(model, torch.Generator().manual_seed(seed))
    return model


def global_model(state: GlobalState, input_dim: int, config: FederationConfig) -> ReportMLP:
    """A torch model predicting every label of ``state``."""
    model = node_model(input_dim, len(state.labels), config)
    load_arrays(model, state.shared, state.task)
    return model.eval()
