"""reportfed: federated radiology-report labeling with surgical aggregation.

The public API is the names below, imported from ``reportfed`` itself (``from reportfed import
ReportLabeler``); every module under ``reportfed/`` is internal and may move. The names are
loaded on first use, so ``import reportfed`` stays light (no torch, no scikit-learn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reportfed.core.public import lazy_names
from reportfed.core.telemetry import switch_off

__version__ = "0.1.0"

switch_off()  # no library's usage telemetry (reportfed.core.telemetry)

#: each public name and the internal module that defines it
_PUBLIC = {
    # label and train
    "ReportLabeler": "reportfed.labeler",
    "ReportReader": "reportfed.reader",
    "Annotation": "reportfed.reader",
    "load_default_model": "reportfed.default_model",
    "FederationConfig": "reportfed.core.config",
    "LabelSpace": "reportfed.core.labels",
    "combine": "reportfed.combined",
    # the rules: findings a hospital defines, the lexicon, the four states
    "Findings": "reportfed.text.findings",
    "read_findings": "reportfed.text.findings",
    "Lexicon": "reportfed.text.lexicon",
    "Corrections": "reportfed.text.corrections",
    "rule_states": "reportfed.text.states",
    "report_mentions": "reportfed.text.states",
    # data
    "ReportTable": "reportfed.data.table",
    "read_table": "reportfed.data.table",
    "load_iu": "reportfed.data.iu",
    "load_negbio": "reportfed.data.iu",
    "load_mimic": "reportfed.data.mimic",
    # errors and warnings
    "ReportfedError": "reportfed.core.errors",
    "ConfigError": "reportfed.core.errors",
    "InputFileError": "reportfed.core.errors",
    "LabelError": "reportfed.core.errors",
    "ModelFileError": "reportfed.core.errors",
    "EmbeddingError": "reportfed.core.errors",
    "ReportfedWarning": "reportfed.core.errors",
}

__all__ = ["__version__", *_PUBLIC]


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())

if TYPE_CHECKING:  # what type checkers and IDEs see (``X as X``: a re-export)
    from reportfed.combined import combine as combine
    from reportfed.core.config import FederationConfig as FederationConfig
    from reportfed.core.errors import ConfigError as ConfigError
    from reportfed.core.errors import EmbeddingError as EmbeddingError
    from reportfed.core.errors import InputFileError as InputFileError
    from reportfed.core.errors import LabelError as LabelError
    from reportfed.core.errors import ModelFileError as ModelFileError
    from reportfed.core.errors import ReportfedError as ReportfedError
    from reportfed.core.errors import ReportfedWarning as ReportfedWarning
    from reportfed.core.labels import LabelSpace as LabelSpace
    from reportfed.data.iu import load_iu as load_iu
    from reportfed.data.iu import load_negbio as load_negbio
    from reportfed.data.mimic import load_mimic as load_mimic
    from reportfed.data.table import ReportTable as ReportTable
    from reportfed.data.table import read_table as read_table
    from reportfed.default_model import load_default_model as load_default_model
    from reportfed.labeler import ReportLabeler as ReportLabeler
    from reportfed.reader import Annotation as Annotation
    from reportfed.reader import ReportReader as ReportReader
    from reportfed.text.corrections import Corrections as Corrections
    from reportfed.text.findings import Findings as Findings
    from reportfed.text.findings import read_findings as read_findings
    from reportfed.text.lexicon import Lexicon as Lexicon
    from reportfed.text.states import report_mentions as report_mentions
    from reportfed.text.states import rule_states as rule_states
