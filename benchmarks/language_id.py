"""Language identifiers on radiology sentences: which of them tells English reports from reports
in other languages, sentence by sentence, and at what cost.

Sets: every distinct findings sentence of IU's reports and of the three suites (English, the
suites' other-language reports left out), short telegraphic English ("LA enlargement.",
"Non-displaced left 6th rib fracture.", "Dr. Müller notified."), and short sentences in German,
French, Spanish, Italian, Portuguese, Dutch and the Nordic languages, template answers among
them ("Pneumothorax: nein."). Each identifier is asked over the same candidate languages
(:data:`reportfed.text.language.LANGUAGES`) whether a sentence is English; ``reportfed`` is the
rule reportfed uses (:mod:`reportfed.text.language`: its words' evidence, then py3langid),
judged per report as the labeler judges. lingua and langdetect run where installed
(``pip install lingua-language-detector langdetect``).

    python benchmarks/language_id.py [--out benchmarks/results/language_id.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results" / "language_id.json"
SUITES = Path(__file__).resolve().parents[1] / "tests" / "data"
TELEGRAPHIC = (
    "Non-displaced left 6th rib fracture.", "Non-specific bowel gas pattern.",
    "Moderate cardiomegaly.", "Dr. Müller notified.", "LA enlargement.", "Cardiomegaly.",
    "No pneumothorax.", "Pneumothorax: none.", "Pneumothorax: no.", "Lines and tubes: none.",
    "Heart: normal size.", "NG tube in stomach.", "ET tube 4 cm above carina.", "S/p CABG.",
    "Bibasilar atelectasis.", "Small L effusion.", "No PTX.", "Cardiomegaly, unchanged.",
)  # fmt: skip
FOREIGN = {
    "German": ("Kein Pneumothorax.", "Herz normal groß.", "Kein Pleuraerguss.",
               "Pneumothorax: nein.", "Keine Infiltrate.", "Lunge beidseits frei belüftet."),
    "French": ("Pas de pneumothorax.", "Pas d'épanchement pleural.", "Cœur de taille normale.",
               "Pneumothorax: non.", "Absence de foyer de condensation."),
    "Spanish": ("Sin derrame pleural.", "No hay neumotórax.", "Silueta cardíaca normal.",
                "Pulmones sin infiltrados."),
    "Italian": ("Nessun pneumotorace.", "Cuore di dimensioni normali.", "Polmoni liberi."),
    "Portuguese": ("Sem derrame pleural.", "Sem pneumotórax.", "Coração de tamanho normal."),
    "Dutch": ("Geen pneumothorax.", "Geen pleuravocht."),
    "Nordic": ("Ingen pneumothorax.", "Ingen pleuravätska.", "Hjertet er normalt stort.",
               "Pneumothorax: nej.", "Pneumothorax: nei."),
}  # fmt: skip


def _english_sets() -> tuple[dict[str, list[str]], list[list[str]]]:
    """The English sets, and the sentences of IU's first 1,000 reports, report by report."""
    from reportfed.data.iu import load_iu
    from reportfed.text.sentences import split_sentences

    reports = [split_sentences(t) for t in load_iu().texts]
    iu = sorted({s for sentences in reports for s in sentences})
    suites = []
    for name in ("behaviour", "layouts", "mimic_style"):
        frame = pd.read_csv(SUITES / f"{name}.csv", keep_default_na=False)
        if "category" in frame:
            frame = frame[frame["category"] != "other languages"]
        suites += [s for t in frame["report"] for s in split_sentences(t)]
    sets = {"IU": iu, "suites": sorted(set(suites)), "telegraphic": list(TELEGRAPHIC)}
    return sets, reports[:1000]


def _identifiers() -> dict[str, Callable[[list[str]], list[bool]]]:
    """Per identifier, whether it calls each sentence of a report another language than
    English."""
    from reportfed.text.language import LANGUAGES, foreign_sentences

    def each(judge: Callable[[str], bool]) -> Callable[[list[str]], list[bool]]:
        return lambda sentences: [judge(s) for s in sentences]

    out: dict[str, Callable[[list[str]], list[bool]]] = {
        "reportfed (words, then py3langid)": foreign_sentences
    }
    import py3langid

    py3langid.set_languages(list(LANGUAGES))

    def langid(s: str) -> bool:
        ranked = dict(py3langid.rank(s))
        top = max(ranked, key=ranked.__getitem__)
        return top != "en" and math.isfinite(ranked[top])

    out["py3langid 0.4"] = each(langid)
    try:
        from lingua import Language, LanguageDetectorBuilder
    except ImportError:
        pass
    else:
        names = {"en": "ENGLISH", "de": "GERMAN", "fr": "FRENCH", "es": "SPANISH", "it": "ITALIAN",
                 "pt": "PORTUGUESE", "nl": "DUTCH", "sv": "SWEDISH", "da": "DANISH",
                 "no": "BOKMAL"}  # fmt: skip
        detector = LanguageDetectorBuilder.from_languages(
            *(getattr(Language, names[c]) for c in LANGUAGES)
        ).build()
        out["lingua 2.1"] = each(
            lambda s: detector.detect_language_of(s) not in (Language.ENGLISH, None)
        )
    try:
        from langdetect import DetectorFactory, LangDetectException, detect
    except ImportError:
        pass
    else:
        DetectorFactory.seed = 0

        def langdetect(s: str) -> bool:
            try:
                return detect(s) != "en"
            except LangDetectException:
                return False

        out["langdetect 1.0"] = each(langdetect)
    return out


def main() -> None:
    from machine import machine

    from reportfed.core.files import atomic_write

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    english, reports = _english_sets()
    rows = []
    for name, judge in _identifiers().items():

        def foreign(sentence: str, judge: Callable[[list[str]], list[bool]] = judge) -> bool:
            return judge([sentence])[0]

        row: dict[str, object] = {"identifier": name}
        for set_name, sentences in english.items():
            row[f"{set_name}: English called another language"] = sum(map(foreign, sentences))
            row[f"{set_name}: sentences"] = len(sentences)
        row["telegraphic: called another language"] = [s for s in TELEGRAPHIC if foreign(s)]
        for language, sentences in FOREIGN.items():
            row[f"{language}: missed"] = [s for s in sentences if not foreign(s)]
            row[f"{language}: sentences"] = len(sentences)
        start = time.perf_counter()
        for sentences in reports:
            judge(sentences)
        row["seconds per 1,000 reports"] = time.perf_counter() - start
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False))
    found = {"machine": machine(), "rows": rows}
    atomic_write(args.out, (json.dumps(found, indent=2, ensure_ascii=False) + "\n").encode())


if __name__ == "__main__":
    main()
