"""Headless Chromium for the page's tests and benchmark: Debian's chromium driven by
Playwright (Playwright's own browser download cannot work on these machines)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, sync_playwright

from ember.errors import EmberError

CHROMIUM = "/usr/bin/chromium"
# No background traffic: the machines' closed network refuses it, many times a start.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[BrowserContext]:
    """A fresh headless Chromium (new empty profile), closed on exit."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        raise EmberError(f"no Chromium at {CHROMIUM}: install Debian's chromium package (`make chromium`)")
    with tempfile.TemporaryDirectory(prefix="ember-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            args=FLAGS,
            headless=True,
            viewport={"width": width, "height": height},
        )
        try:
            yield context
        finally:
            context.close()
