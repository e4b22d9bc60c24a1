"""docs/integrity.md, the threat model, held to the code: every test it names exists (the
file, and the test function in it), every claim of its sections is a bullet naming the
test that holds it, and its table of routes places every route of the app, no more."""

from __future__ import annotations

import re

import pytest
from app_routes import app_routes
from paths import ROOT

DOC = ROOT / "docs" / "integrity.md"
TEST = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
# sections that say what cannot be held by a test: what is kept, who the student is, what
# remains to do, and the exam image (described; the split of the book from the service
# builds it, with its tests)
FREE = ("What is worth protecting", "Who the student is", "What remains", "The exam image")


def sections() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def bullets(body: str) -> list[str]:
    """The top-level bullets of a section, each with its indented continuation lines."""
    out: list[str] = []
    open_bullet = False
    for line in body.splitlines():
        if line.startswith("- "):
            out.append(line)
            open_bullet = True
        elif open_bullet and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
        else:
            open_bullet = False
    return out


def test_every_test_the_doc_names_exists():
    named = TEST.findall(DOC.read_text(encoding="utf-8"))
    assert named, "the doc names no test"
    missing = []
    for path, name in named:
        file = ROOT / path
        if not file.is_file() or not re.search(rf"^def {name}\(", file.read_text(
                encoding="utf-8"), re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []


def test_every_claim_names_its_test():
    unheld = [f"{title}: {b[:80]}" for title, body in sections().items()
              if not title.startswith(FREE) for b in bullets(body) if not TEST.search(b)]
    assert unheld == []


def test_every_route_of_the_app_is_in_the_table(tmp_path):
    from glassllm_service.app import create_app
    from glassllm_service.settings import Settings

    body = sections()["Every route"]
    rows = re.findall(r"^\| `(GET|HEAD|POST|PUT|PATCH|DELETE) ([^`]+)` \|", body, re.MULTILINE)
    assert len(rows) == len(set(rows)), "a route is in the table twice"
    header = "| route | homework (student) | graded session (student) |"
    assert header in body
    app = create_app(Settings(mode="course", data_dir=tmp_path, metrics=True,
                              course_secrets="k1=" + "s" * 32))
    assert set(rows) == app_routes(app)


@pytest.mark.parametrize("text, held", [
    ("- a claim\n  `tests/a.py::test_b`\n", True), ("- a claim, no test\n", False)])
def test_a_bullet_is_read_with_its_continuation_lines(text, held):
    assert bool(TEST.search(bullets(text)[0])) is held
