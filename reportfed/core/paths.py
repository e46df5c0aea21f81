"""Where reportfed keeps things on disk."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from reportfed.core.environment import setting
from reportfed.core.errors import OutputFileError


def cache_dir() -> Path:
    """User cache directory (``$REPORTFED_CACHE_DIR`` or the platform's user cache)."""
    root = setting("REPORTFED_CACHE_DIR") or platformdirs.user_cache_dir("reportfed")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(
            f"cannot make reportfed's cache folder {path} ({exc.strerror}): set "
            "REPORTFED_CACHE_DIR to a folder this user can write"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputFileError(
            f"reportfed's cache folder {path} is not writable by this user: set "
            "REPORTFED_CACHE_DIR to a folder this user can write"
        )
    return path


#: the source checkout's cache folder, where reportfed runs from a checkout (an editable install)
CHECKOUT_EMBEDDINGS = Path(__file__).resolve().parents[2] / "embeddings_cache"


def embeddings_cache_dir() -> Path:
    """The embedding cache, the same from any working directory: ``$REPORTFED_EMBEDDINGS_CACHE``
    (e.g. a team's shared folder), else the source checkout's ``embeddings_cache/`` when reportfed
    runs from one, else ``embeddings`` in the user cache (:func:`cache_dir`)."""
    chosen = setting("REPORTFED_EMBEDDINGS_CACHE")
    if chosen:
        return Path(chosen).expanduser()
    if CHECKOUT_EMBEDDINGS.is_dir() and (CHECKOUT_EMBEDDINGS.parent / "pyproject.toml").is_file():
        return CHECKOUT_EMBEDDINGS
    return cache_dir() / "embeddings"


def flwr_home() -> Path:
    """Flower's home (``$FLWR_HOME``) for the processes reportfed starts:
    ``$REPORTFED_FLWR_HOME`` or ``flwr-home`` in the user cache, never ``~/.flwr``."""
    return Path(setting("REPORTFED_FLWR_HOME") or cache_dir() / "flwr-home")
