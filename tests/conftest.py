"""Fixtures the browser test modules share (tests/browser_session.py holds the rest): one
real sandbox and one Debian Chromium per module. A module may define its own ``url``."""

from __future__ import annotations

import pytest
from sandbox_server import running_sandbox


@pytest.fixture(scope="module")
def url():
    with running_sandbox() as u:
        yield u


@pytest.fixture(scope="module")
def browser():
    from browser_session import ARGS, CHROMIUM, sync_playwright  # skips without Chromium

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()
