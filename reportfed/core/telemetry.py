"""No usage telemetry from the libraries reportfed runs, by their own switches.

A hospital's labeler sends nothing it was not asked to: importing reportfed sets, where the user
has not set them already, the switches these libraries document. Processes reportfed starts
(Flower's SuperLink, SuperNodes and apps) inherit them. OpenVINO's usage statistics come from
its model-conversion tools, which ``import openvino`` loads when it can;
:func:`import_openvino` loads OpenVINO without them (reportfed compiles its own ONNX export and
converts nothing).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

#: environment switches: onnxruntime's (its 1DS telemetry writes a device id and an event store
#: under ``~/.cache/Microsoft``), Flower's telemetry and its check for a newer release
SWITCHES = {
    "ORT_DISABLE_TELEMETRY": "1",
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
}
#: OpenVINO's model-conversion tools: their import sends a usage event and writes
#: ``~/intel/openvino_ga_cid`` and ``~/intel/stats``; ``openvino`` imports them only if it can
_CONVERSION_TOOLS = "openvino.tools.ovc"


def switch_off() -> None:
    """Set :data:`SWITCHES` in this process's environment where they are not set."""
    for name, value in SWITCHES.items():
        os.environ.setdefault(name, value)


def import_openvino() -> ModuleType:
    """``openvino``, imported without its conversion tools where it is not imported already (a
    later ``import openvino.tools.ovc`` of the user's still works)."""
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = _CONVERSION_TOOLS not in sys.modules
    if blocked:
        sys.modules[_CONVERSION_TOOLS] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import openvino
    finally:
        if blocked:
            sys.modules.pop(_CONVERSION_TOOLS, None)
    return openvino
