"""Report text as a reader sees it: one form for every path that reads reports (tables,
sentences, the library's own texts)."""

from __future__ import annotations

import unicodedata

#: format characters that part words where they stand (a zero-width space is a space); every
#: other one (joiners, the byte-order mark, bidirectional controls, soft hyphens) joins them
_PARTING = {"\u200b": " "}


def as_read(text: str) -> str:
    """``text`` as reportfed reads it: Unicode's NFKC form (full-width letters, ligatures and
    compatibility forms as their plain letters) with no format character, so that what a
    reader sees is what the rules and the model read ("No pneumothorax." and a zero-width space
    before "Small left effusion." are two sentences, as they look). Idempotent."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)
    return "".join(_PARTING.get(c, "") if unicodedata.category(c) == "Cf" else c for c in text)
