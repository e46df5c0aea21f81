"""Report text as a reader sees it: one form for every path that reads reports (tables,
sentences, the library's own texts)."""

from __future__ import annotations

import unicodedata

#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15): code points
#: a renderer shows as nothing when it cannot show them otherwise (zero-width spaces and
#: joiners, the byte-order mark, bidirectional controls, variation selectors, the combining
#: grapheme joiner, Hangul fillers, tags)
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
#: marks that end a sentence in other scripts, read as a full stop (NFKC maps the full-width
#: and small forms of "." already): ideographic, Armenian, Arabic, Devanagari, Ethiopic,
#: stenographic
FULL_STOPS = "\u3002\u0589\u06d4\u0964\u1362\u2e3c"
#: characters that show as a blank without being white space to Python: the Braille blank
BLANKS = "\u2800"


def _table() -> dict[int, str | None]:
    table: dict[int, str | None] = {
        code: None for lo, hi in DEFAULT_IGNORABLE for code in range(lo, hi + 1)
    }
    table |= {ord(c): "." for c in FULL_STOPS} | {ord(c): " " for c in BLANKS}
    return table


_AS_READ = _table()


def as_read(text: str) -> str:
    """``text`` as reportfed reads it: Unicode's NFKC form (full-width letters, ligatures and
    compatibility forms as their plain letters) without the characters that show nothing
    (:data:`DEFAULT_IGNORABLE`, removed, so that "cardio\\u200bmegaly" is "cardiomegaly" and
    "N\\u200bo" is "No"), with other scripts' full stops as "." and blanks that are no white
    space as spaces: what a reader sees is what the rules and the model read. A sentence's
    end followed by a capital without a space ("pneumothorax.Small") is split by
    :mod:`reportfed.text.sentences`. Idempotent."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_AS_READ)
