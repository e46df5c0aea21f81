"""A real browser for the pages reportfed writes: Debian's ``chromium``, headless."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    """The chromium executable (the test skips where it is not installed: ``apt-get install
    chromium``; CI installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed")
    return found


def _run(page: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    address = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--disable-background-networking", "--enable-logging=stderr", "--v=0", *flags,
               address]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def render(page: Path, screenshot: Path, fragment: str = "") -> tuple[str, list[str]]:
    """Load ``page`` (at ``#fragment``, where given): its DOM after rendering, and the browser's
    console messages; a PNG screenshot of it is saved to ``screenshot``."""
    shot = _run(page, f"--screenshot={screenshot}", "--window-size=1100,2600", fragment=fragment)
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
    dom = _run(page, "--dump-dom", fragment=fragment)
    console = [line for line in shot.stderr.splitlines() + dom.stderr.splitlines()
               if ":CONSOLE" in line]  # fmt: skip
    return dom.stdout, console


@contextlib.contextmanager
def driven(page: Path) -> Iterator[Any]:
    """``page`` open in Debian's chromium, headless, driven by Playwright (clicks, keys,
    downloads; ``pip install playwright``, no browser download: it drives this chromium); the
    page's console errors fail the test when it ends."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            tab = browser.new_context(accept_downloads=True).new_page()
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.goto(page.resolve().as_uri())
            yield tab
            assert errors == []
        finally:
            browser.close()
