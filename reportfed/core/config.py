"""The settings of a federation, declared once (:mod:`reportfed.core.schema` turns them into flags,
run-config, node-config and wire keys, and docs): the hyperparameters (:class:`FederationConfig`)
and what each site decides for itself (:class:`SiteSettings`, :class:`NodeSettings`). Torch-free,
so the command line builds its parser without importing torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from reportfed.core.errors import ConfigError
from reportfed.core.schema import setting
from reportfed.core.server import ServerOptions

#: what a ``-1`` label cell means for presence
Uncertain = Literal["zeros", "ones", "ignore"]
#: what a blank label cell means: ``negative`` (not mentioned: the CheXpert labeler's convention,
#: the default for report and image tables alike) or ``ignore`` (not annotated, masked out)
Blank = Literal["negative", "ignore"]


#: what a model reads of a report: the whole text, or its sentences one by one
#: (:mod:`reportfed.embed.granularity` embeds either)
Granularity = Literal["report", "sentence"]
GRANULARITIES: tuple[Granularity, ...] = ("report", "sentence")
GRANULARITY_HELP = (
    "sentence: score every sentence, pool per label; report: one embedding per report "
    "(the papers' method)"
)


def check_fraction(name: str, value: float) -> None:
    """Refuse a share of rows held out (validation, test) outside [0, 1) (a ``ConfigError``)."""
    if not 0 <= value < 1:
        raise ConfigError(f"{name} must be in [0, 1), got {value!r}")


@dataclass(frozen=True)
class FederationConfig(ServerOptions):
    """Hyperparameters of a federated run: the model's architecture (``hidden``, ``dropout``,
    ``skip``; what a model file keeps), the nodes' local training, the server's rules
    (:class:`~reportfed.core.server.ServerOptions`) and the run (``rounds``, ``seed``).

    The defaults are the product's, chosen by the ``beyond`` and ``consortium`` experiments
    (docs/experiments.md, "The product's defaults"); :data:`PAPER` is the paper's code. Beyond
    the paper (the product turns on ``distill``, ``balance``, ``templates``, ``prox`` and
    ``read``): ``distill`` > 0 is knowledge transfer for the labels a node does not annotate
    (the node receives the whole global model, and its loss adds ``distill`` x the BCE between
    its outputs and the global model's predictions on its reports at the start of the round; its
    template rows are negatives for those labels; it still sends back only its own labels'
    rows). ``balance`` weighs each positive of a node's label by that label's
    negatives/positives on the node (clipped to 100). ``skip`` gives the head a linear term on
    the input embedding, merged label by label with the head's rows. ``prox`` > 0 adds FedProx's
    proximal term towards the weights the node received. ``templates`` adds sentences stating
    and negating each of a node's labels to its training rows (:mod:`reportfed.text.templates`).
    ``read`` has each node also train the federation's labels it does not annotate but the text
    rules can read, labelled as they read its own reports
    (:func:`reportfed.reports.node.with_read`); it sends those labels' rows as its own, and its
    thresholds and calibration still come from its annotations alone.
    ``node_lr`` maps node names to their own learning rates.
    """

    rounds: int = setting(20, "federated rounds")
    local_epochs: int = setting(5, "epochs each node trains per round")
    lr: float = setting(1e-3, "the nodes' Adam learning rate")
    node_lr: dict[str, float] = setting({}, "learning rate of named nodes (else lr)")
    batch_size: int = setting(32, "the nodes' batch size")
    hidden: tuple[int, ...] = setting((512, 256), "hidden layer widths", architecture=True)
    dropout: float = setting(0.2, "dropout after each hidden layer", architecture=True)
    seed: int = setting(0, "seed of the splits, the initial model, the batches and the dropout")
    distill: float = setting(
        1.0, "weight of knowledge transfer for labels a node lacks (0 = the paper's method)"
    )
    weight_decay: float = setting(0.0, "L2 term of the nodes' Adam")
    balance: bool = setting(True, "weigh positives by negatives/positives per label")
    skip: bool = setting(False, "add a linear term on the embedding to the head", architecture=True)
    prox: float = setting(0.01, "FedProx proximal term weight (0 = off)")
    templates: bool = setting(
        True, "also train on sentences stating and negating each of a node's labels"
    )
    read: bool = setting(
        True,
        "also train the federation's labels a node does not annotate, as the text rules read its "
        "reports (affirmed 1, negated or not mentioned 0, hedged not annotated)",
    )

    def __post_init__(self) -> None:
        """Refuse values no run can use (a ``ConfigError`` naming the field and its range)."""
        super().__post_init__()
        checks = {
            "rounds": (self.rounds >= 1, "an integer >= 1"),
            "local_epochs": (self.local_epochs >= 1, "an integer >= 1"),
            "batch_size": (self.batch_size >= 1, "an integer >= 1"),
            "lr": (math.isfinite(self.lr) and self.lr > 0, "a finite number > 0"),
            "hidden": (all(h >= 1 for h in self.hidden), "layer widths >= 1"),
            "dropout": (0 <= self.dropout < 1, "in [0, 1)"),
            "distill": (math.isfinite(self.distill) and self.distill >= 0, "a finite number >= 0"),
            "weight_decay": (
                math.isfinite(self.weight_decay) and self.weight_decay >= 0,
                "a finite number >= 0",
            ),
            "prox": (math.isfinite(self.prox) and self.prox >= 0, "a finite number >= 0"),
            "node_lr": (
                all(math.isfinite(v) and v > 0 for v in self.node_lr.values()),
                "finite learning rates > 0",
            ),
        }
        for name, (ok, expected) in checks.items():
            if not ok:
                raise ConfigError(f"{name} must be {expected}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class SiteSettings:
    """How a site reads its own labelled table: ``reportfed train`` applies them to every
    ``--node`` table, a Flower node to its own (:class:`NodeSettings`)."""

    blank: Blank = setting(
        "negative",
        "what a blank label cell means: negative (not mentioned, the CheXpert labeler's "
        "convention) or ignore (not annotated)",
    )
    uncertain: Uncertain = setting(
        "zeros", "what a -1 label means for presence (zeros: as in the papers)"
    )
    val_fraction: float = setting(
        0.1, "share of each site's rows held out for evaluation and calibration, in [0, 1)"
    )

    def __post_init__(self) -> None:
        """Refuse a held-out share outside [0, 1)."""
        check_fraction("val_fraction", self.val_fraction)


@dataclass(frozen=True)
class NodeSettings(SiteSettings):
    """A Flower node's own settings: the flags of ``reportfed federation node``, the keys of its
    node config (``flower-supernode --node-config``) and, but for the private ones (paths on the
    node's disk), of its handshake with the server, which keeps them in the model's provenance.
    Empty values take the run's."""

    data: str = setting(
        "", "this node's table: reports (or images) with label columns", private=True
    )
    name: str = setting("", "node name in logs and the model file (default: the table's stem)")
    embedder: str = setting(
        "",
        "embedder spec (default: minilm); a run that declares another is refused",
    )
    base_url: str = setting("", "base URL of an OpenAI-compatible embedding API", private=True)
    allow_remote_embedder: bool = setting(
        False,
        "let this node's own embedder send its sentences off this machine (openai:) or download "
        "weights (a hub id not in the local cache); off: text and weights stay on the node",
        private=True,
    )
    require_secure_aggregation: bool = setting(
        False, "refuse every run that does not sum the nodes' updates under SecAgg+ masks"
    )
    min_others: int = setting(
        0,
        "refuse to train in a round the server says has fewer than this many other members "
        "(a count the server reports: see docs/federation.md, What each party can do)",
    )
    cache_dir: str = setting("", "embedding cache directory (default: reportfed's)", private=True)
    findings: str = setting(
        "",
        "report nodes: a TOML file of findings this hospital defines (docs/labels.md); the "
        "server admits it only where its definitions agree with the federation's",
        private=True,
    )
    lr: float = setting(0.0, "node-specific learning rate (0: the run's)")
    image_root: str = setting(
        "", "image nodes: directory relative image paths start from", private=True
    )
    layout: str = setting("table", "image nodes: table, nih or mimic")
    split: str = setting(
        "", "image nodes, mimic layout: keep one official split, train, validate or test"
    )
    warm: bool = setting(
        True,
        "answer messages from one warm process that keeps torch imported and the node's data "
        "loaded, not from a fresh process per message",
        private=True,
    )

    def __post_init__(self) -> None:
        """Refuse a held-out share outside [0, 1) and a negative count of other members."""
        super().__post_init__()
        if self.min_others < 0:
            raise ConfigError(f"min_others must be an integer >= 0, got {self.min_others!r}")


#: The paper's settings where the product's defaults differ (Shah et al.: 20 rounds of one local
#: epoch, no knowledge transfer, no class weighting, no template sentences): what the paper
#: reproductions train with.
PAPER_SETTINGS: dict[str, object] = {
    "local_epochs": 1,
    "distill": 0.0,
    "balance": False,
    "templates": False,
    "prox": 0.0,
    "read": False,
}
PAPER = FederationConfig(**PAPER_SETTINGS)  # type: ignore[arg-type]

#: What a Flower run fixes among the hyperparameters: an invalid update (NaN, wrong shape) is
#: dropped, since one hospital's fault must not end a federation (``SurgicalAggregation`` always
#: drops; the app's run config declares it, and the ServerApp refuses another value).
FLOWER_DEFAULTS = {"on_invalid": "drop"}


@dataclass(frozen=True)
class RunSettings:
    """The settings of a Flower run beyond the hyperparameters: what the nodes hold, where the
    run writes, when it starts and waits, what the nodes embed with, and DP. The ServerApp reads
    them from the run config, ``reportfed federation run`` has a flag per field, and the app's
    ``pyproject.toml`` holds their defaults (a test keeps it equal to these)."""

    modality: str = setting(
        "reports",
        "what the nodes hold: reports, or images (reportfed.vision; federation run trains reports)",
    )

    out: str = setting(
        "reportfed-federation", "server-side output directory (global model and history)"
    )
    min_nodes: int = setting(
        2, "nodes needed to start, and valid updates a round needs to change the model"
    )
    evaluate_every: int = setting(
        1, "evaluate on the nodes' held-out rows every N rounds (0: after the last only)"
    )
    round_timeout: float = setting(600.0, "seconds a round waits for the nodes' updates")
    join_timeout: float = setting(
        600.0,
        "seconds the server waits for --min-nodes nodes to connect, and a node has to answer its "
        "first message (it embeds its reports then)",
    )
    embedder: str = setting(
        "minilm",
        "the embedder every node must embed with: a node whose own differs refuses the run, and "
        "the server reads the nodes' vector space from its files",
    )
    granularity: Granularity = setting("sentence", GRANULARITY_HELP)
    fingerprint: str = setting(
        "", "the fingerprint of that embedder's vectors ('': read from its files on the server)"
    )
    dim: int = setting(0, "the dimension of its vectors (0: read from its files on the server)")
    resume: bool = setting(True, "continue after the last round saved in the output directory")
    secure_aggregation: bool = setting(
        False,
        "sum the nodes' updates under Flower's SecAgg+ masks: the server sees only their sum",
    )
    dp_noise: float = setting(0.0, "DP noise multiplier (0 = off)")
    dp_clip: float = setting(1.0, "DP clipping norm of node updates")
    findings: str = setting(
        "",
        "the findings the operator defines (JSON of a findings file's definitions: federation "
        "run --findings FILE writes it): a node that defines one of them otherwise is left out",
    )
