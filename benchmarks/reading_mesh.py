"""The text rules' reading of the labels a site lacks, against IU's MeSH-derived labels: on the
experiments' rows (IU's 3,832 reports with all 13 findings annotated), per finding, how many
reports MeSH labels positive, how many the rules read positive, how many they leave not
annotated (hedged), and how the read cells agree with MeSH (true and false positives, MeSH
positives read negative, F1). A site that reads a label it lacks trains on exactly this reading
(:func:`reportfed.text.states.read_labels`), so where it disagrees with MeSH the federated model
learns the rules' definition and the experiments score it against MeSH's. docs/experiments.md
renders the committed results beside the K=10 per-label F1 (``Where the remaining gap sits``).
No rule was chosen on these numbers.

    python benchmarks/reading_mesh.py [--out benchmarks/results/reading_mesh.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.machine import save_result
from experiments.runner import iu_read, iu_table


def measure() -> dict[str, object]:
    """Per finding, the rules' reading of every report against its MeSH-derived label."""
    table = iu_table()
    read, mesh = iu_read(), table.labels
    findings: dict[str, dict[str, int]] = {}
    for j, name in enumerate(table.label_space):
        stated = ~np.isnan(read[:, j])
        r, y = read[stated, j] == 1, mesh[stated, j] == 1
        findings[name] = {
            "positives": int((mesh[:, j] == 1).sum()),
            "read_positive": int(r.sum()),
            "hedged": int((~stated).sum()),
            "true_positive": int((r & y).sum()),
            "false_positive": int((r & ~y).sum()),
            "missed": int((~r & y).sum()),
        }
    return {"reports": len(table.texts), "findings": findings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/reading_mesh.json")
    args = parser.parse_args()
    save_result(Path(args.out), measure())


if __name__ == "__main__":
    main()
