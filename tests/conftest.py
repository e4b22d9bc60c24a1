"""Fixtures several test modules share: one real sandbox and one Debian Chromium per module
(the browser tests; tests/browser_session.py holds the rest; a module may define its own
``url``), and the sandbox's access-log lines as a list."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

import pytest
from sandbox_server import running_sandbox

_RECORD_DIR: list[str] = []


def pytest_configure(config):
    """The course-mode sandboxes of the run keep their record (SQLite) in a directory of
    the run, never in the user's ~/.local/share/glassllm."""
    if "GLASSLLM_DATA_DIR" not in os.environ:
        _RECORD_DIR.append(tempfile.mkdtemp(prefix="glassllm-record-"))
        os.environ["GLASSLLM_DATA_DIR"] = _RECORD_DIR[0]


def pytest_unconfigure(config):
    for path in _RECORD_DIR:
        shutil.rmtree(path, ignore_errors=True)


def _own_record_dir(kind: str):
    """A record directory of this module's or test's own: the record remembers each
    exercise's case per version (a case changed under the same version stops a sandbox),
    and two tests may serve different cases under one exercise id."""
    if not _RECORD_DIR:                      # the caller chose GLASSLLM_DATA_DIR: theirs
        yield
        return
    before = os.environ["GLASSLLM_DATA_DIR"]
    os.environ["GLASSLLM_DATA_DIR"] = tempfile.mkdtemp(prefix=kind, dir=_RECORD_DIR[0])
    try:
        yield
    finally:
        os.environ["GLASSLLM_DATA_DIR"] = before


@pytest.fixture(autouse=True, scope="module")
def _record_dir_per_module():
    yield from _own_record_dir("module-")


@pytest.fixture(autouse=True)
def _record_dir_per_test():
    yield from _own_record_dir("test-")


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


class Lines(logging.Handler):
    """Keeps every record's message."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def access_lines():
    """The access log's lines (glassllm.access) written during the test."""
    handler = Lines()
    log = logging.getLogger("glassllm.access")
    log.addHandler(handler)
    yield handler.lines
    log.removeHandler(handler)
