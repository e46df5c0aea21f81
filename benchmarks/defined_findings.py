"""The example's defined findings (``examples/findings.toml``) read on every IU report, beside
what IU's MeSH index terms say of each report: how many reports the rules read affirmed,
negated and uncertain, how many MeSH indexes with the finding, and how many of the affirmed it
indexes. docs/labels.md renders the committed results. The example's regular expressions were
written from IU reports its phrases missed, so these are counts on the rows that chose them.

    python benchmarks/defined_findings.py [--out benchmarks/results/defined_findings.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from reportfed.core.files import atomic_write
from reportfed.data.iu import load_iu_frame
from reportfed.text.findings import read_findings
from reportfed.text.lexicon import Lexicon
from reportfed.text.states import report_mentions

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "findings.toml"
#: per finding, the MeSH headings (lower case; each a set of words one index term holds) that
#: say a report has it
MESH = {
    "Hiatal hernia": [{"hernia, hiatal"}],
    "Aortic calcification": [{"aort", "calcinosis"}, {"atherosclerosis"}],
}


def _indexed(terms: list[str], headings: list[set[str]]) -> bool:
    return any(all(word in t.lower() for word in heading) for t in terms for heading in headings)


def measure() -> dict[str, object]:
    frame = load_iu_frame()
    findings = read_findings(EXAMPLE)
    texts = list(frame["text"])
    read = report_mentions(texts, list(findings.names), Lexicon(findings))
    out: dict[str, object] = {"reports": len(texts), "checksum": findings.checksum}
    for name in findings.names:
        states = [None if r[name] is None else r[name].assertion for r in read]  # type: ignore[union-attr]
        indexed = [_indexed(t, MESH[name]) for t in frame["mesh_major"]]
        affirmed = [s == "affirmed" for s in states]
        out[name] = {
            "affirmed": sum(affirmed),
            "negated": states.count("negated"),
            "uncertain": states.count("uncertain"),
            "indexed": sum(indexed),
            "affirmed_and_indexed": sum(a and i for a, i in zip(affirmed, indexed, strict=True)),
            "mesh": [" and ".join(sorted(h)) for h in MESH[name]],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/defined_findings.json")
    args = parser.parse_args()
    found = measure()
    atomic_write(args.out, (json.dumps(found, indent=2) + "\n").encode())
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
