"""The contract in the repository (docs/) and served at /docs/contract/ (H7).

Every clause id that the code, the page or the tests cite resolves to an anchor of a served
docs page; every error code the service can give is in the HTTP contract's table, with its
status; every registry op has its section with its inputs read from the registry.
"""

from __future__ import annotations

import os
import re

import pytest
from fastapi.testclient import TestClient
from paths import ROOT

from glassllm.sandbox import registry
from glassllm_service.app import create_app
from glassllm_service.routes import contract

# L3.5, H5, P2, L7 ... but not the name L06 (a leading zero is no clause)
CLAUSE_ID = re.compile(r"\b([LHP](?:0|[1-9][0-9]*)(?:\.[0-9]+)?)\b")
PAGES = {"library": "L", "http": "H", "page": "P"}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


@pytest.fixture(scope="module")
def anchors(client) -> dict[str, set[str]]:
    """page -> the ids of its elements, as served."""
    out = {}
    for page in ("", *PAGES):
        res = client.get(f"/docs/contract/{page}")
        out[page] = set(re.findall(r'\sid="([^"]+)"', res.text))
    return out


def cited_clause_ids() -> set[str]:
    found = set()
    for folder in ("glassllm", "service", "static", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if "vendor" in path.parts:  # third-party files (axe-core and such) cite no clauses
                continue
            if path.suffix in {".py", ".js", ".html", ".css"} and path.is_file():
                found |= set(CLAUSE_ID.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_page_is_served_as_html(client):
    for page in ("", *PAGES):
        res = client.get(f"/docs/contract/{page}")
        assert res.status_code == 200, page
        assert res.headers["content-type"].startswith("text/html")
        assert "<h1" in res.text
    assert client.get("/docs/contract", follow_redirects=False).headers["location"] == (
        "contract/")                        # relative: the sandbox may sit under a prefix
    assert client.head("/docs/contract/library").status_code == 200
    missing = client.get("/docs/contract/secrets")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    # Swagger UI keeps /docs
    assert "swagger-ui" in client.get("/docs").text


def test_every_link_between_served_pages_lands(client):
    """H7 (QA: the index's "Generating a client" and http's links to performance,
    serving and training were 404): every docs/*.md is served, and every relative
    link of every served page answers 200."""
    from glassllm_service.routes.contract import docs_dir

    stems = sorted(p.stem for p in docs_dir().glob("*.md"))
    assert {"index", "http", "library", "page", "settings", "serving", "openapi-clients",
            "architecture"} <= set(stems)
    for stem in stems:
        url = "/docs/contract/" + ("" if stem == "index" else stem)
        res = client.get(url)
        assert res.status_code == 200 and "<h1" in res.text, stem
        text = res.text
        for href in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', text):
            target = href if href.startswith("/") else "/docs/contract/" + href.removeprefix("./")
            assert client.get(target).status_code == 200, (stem, href)


def test_the_pages_work_offline(client):
    """No external URL: no script, stylesheet, font or link leaves the sandbox."""
    for page in ("", *PAGES):
        text = client.get(f"/docs/contract/{page}").text
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//", text), page
        assert "<script" not in text


def test_the_scan_finds_the_clauses_it_should():
    """The scan itself: it sees the ids cited across the repository, and no name as one."""
    ids = cited_clause_ids()
    assert {"L0.5", "L3.5", "L7", "H4", "H5", "P1"} <= ids
    assert "L06" not in ids
    assert len(ids) >= 40


def test_every_cited_clause_id_has_an_anchor(anchors):
    for clause in sorted(cited_clause_ids()):
        page = {v: k for k, v in PAGES.items()}[clause[0]]
        assert clause in anchors[page], f"{clause} is cited; /docs/contract/{page} lacks it"


def test_anchors_are_unique_and_sections_of_every_part_exist(client, anchors):
    for page in PAGES:
        text = client.get(f"/docs/contract/{page}").text
        ids = re.findall(r'\sid="([^"]+)"', text)
        assert len(ids) == len(set(ids)), page
    assert {f"L{k}" for k in range(8)} <= anchors["library"]
    assert {f"H{k}" for k in range(1, 9)} <= anchors["http"]
    assert {f"P{k}" for k in range(1, 5)} <= anchors["page"]


def test_every_registry_op_has_its_section_with_its_inputs(client):
    text = client.get("/docs/contract/library").text
    for name, op in registry.OPS.items():
        start = text.index(f'<h3 id="{name}">')
        section = text[start:text.find("<h3", start + 1)]
        assert "Backward" in section or op.output == "ndarray", name
        for i in op.inputs:
            assert f"<td><code>{i.name}</code></td>\n<td>{i.kind}</td>" in section, (name, i.name)
    # and no op section for an op the registry lacks (the modules come after the ops)
    ops_part = text[:text.index('id="beyond-the-ops')]
    sections = set(re.findall(r'<h3 id="([a-z_]+)">', ops_part))
    assert sections == set(registry.OPS)


def test_links_between_the_markdown_files_become_served_links(client):
    text = client.get("/docs/contract/page").text
    assert 'href="library#L1.2"' in text and ".md" not in re.sub(r"<code>.*?</code>", "", text)


# --------------------------------------------------------------------------------------
# the table of error codes (docs/http.md) against the codes the code can produce
# --------------------------------------------------------------------------------------

def codes_in_code() -> dict[str, set[int]]:
    """Every error code the service and the library can give, with its status(es), read
    from the source: ApiError(status, "code", ...), ExprError(..., status=, code=) and
    the HTTP layer's own (glassllm_service/http_errors.py)."""
    codes: dict[str, set[int]] = {}
    for folder in ("service", "glassllm"):
        for path in (ROOT / folder).rglob("*.py"):
            src = path.read_text(encoding="utf-8")
            # ApiError(...), and the record's access refusals: refusal(status, "code", ...)
            for status, code in re.findall(r'(?:ApiError|\brefusal)\(\s*(\d{3}|\w+),\s*"([a-z_]+)"',
                                           src):
                codes.setdefault(code, set()).update([int(status)] if status.isdigit() else [])
            for call in re.findall(r"ExprError\((?:[^()]|\([^()]*\))*\)", src):
                code = re.search(r'code="([a-z_]+)"', call)
                status = re.search(r"status=(\d{3})", call)
                codes.setdefault(code.group(1) if code else "invalid_expression", set()).add(
                    int(status.group(1)) if status else 422)
            for code in re.findall(r'\bcode\s*=\s*"([a-z_]+)"', src):
                codes.setdefault(code, set())
    errors_src = (ROOT / "service/glassllm_service/http_errors.py").read_text(encoding="utf-8")
    for status, code in re.findall(r'(\d{3}): "([a-z_]+)"', errors_src):
        codes.setdefault(code, set()).add(int(status))
    codes.setdefault("http_error", set())
    return codes


def codes_in_docs() -> dict[str, str]:
    text = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `([a-z_]+)` \| ([^|]+?) \|", text, re.MULTILINE))


def test_the_error_table_lists_every_code_the_code_can_give():
    in_code, in_docs = codes_in_code(), codes_in_docs()
    assert {"invalid_input", "shape_error", "queue_full", "unknown_op"} <= set(in_code)  # the scan
    assert set(in_code) == set(in_docs), (
        f"missing from docs/http.md: {sorted(set(in_code) - set(in_docs))};"
        f" documented but never given: {sorted(set(in_docs) - set(in_code))}")
    for code, statuses in in_code.items():
        for status in statuses:
            assert str(status) in in_docs[code], (code, status, in_docs[code])


def test_an_error_code_really_comes_with_its_documented_status(client):
    """Spot checks through the real app: the table's status is the one on the wire."""
    docs = codes_in_docs()
    cases = [
        (client.post("/api/v1/ops/softmaxx", json={"inputs": {}}), "unknown_op"),
        (client.post("/api/v1/ops/add", content=b"{", headers={"Content-Type":
                                                               "application/json"}),
         "invalid_json"),
        (client.post("/api/v1/ops/add", json={"inputs": {"a": [1.0, 2.0], "b": [1.0, 2.0, 3.0]}}),
         "numpy_error"),
        (client.post("/api/v1/ops/linear", json={"inputs": {"x": [[1.0, 2.0]],
                                                            "weight": [[1.0], [2.0], [3.0]]}}),
         "shape_error"),
        (client.post("/api/v1/ops/add", content=b"{}", headers={"Content-Type": "text/plain"}),
         "unsupported_media_type"),
        (client.post("/api/v1/eval", json={"expression": "import os"}), "invalid_expression"),
    ]
    for res, code in cases:
        body = res.json()["error"]
        assert body["code"] == code, (code, body)
        assert docs[code].strip() == str(res.status_code), (code, res.status_code)


def test_the_docs_ship_in_the_wheel_configuration():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"docs" = "glassllm_service/docs"' in pyproject
    assert contract.docs_dir().joinpath("library.md").is_file()


def test_clause_ids_in_the_prose_link_to_anchors_that_exist(client, anchors):
    """(L1.2) in the text is a link; every link to a clause, on every page, resolves."""
    checked = 0
    for page in ("", *PAGES):
        text = client.get(f"/docs/contract/{page}").text
        for target, anchor in re.findall(r'href="(library|http|page|\./)?#([^"]+)"', text):
            served = target if target and target != "./" else page
            assert anchor in anchors[served], f"/docs/contract/{page}: #{anchor} not on {served}"
            checked += 1
    assert checked > 100
    library = client.get("/docs/contract/library").text
    assert '<a href="#L1.2" class="clause">L1.2</a>' in library           # same page
    http_page = client.get("/docs/contract/http").text
    assert '<a href="library#L0.4" class="clause">L0.4</a>' in http_page  # another page


def test_the_settings_table_is_read_from_the_settings():
    """Every setting, with its default as the code gives it: no hand-copied default. The
    served page writes the table afresh; docs/settings.md holds the same table for a
    reader of the repository (GLASSLLM_UPDATE_SNAPSHOT=1 rewrites it after a change)."""
    from glassllm_service.settings import ENV_PREFIX, Settings

    text = TestClient(create_app()).get("/docs/contract/settings").text
    for name in Settings.model_fields:
        assert text.count(f"<code>{ENV_PREFIX}{name.upper()}</code>") == 1, name
    assert "<td><code>GLASSLLM_MAX_ARRAY_ELEMENTS</code></td>\n<td>1 000 000</td>" in text
    # the compute slots default to the CPUs / workers, computed at start-up
    assert ("<td><code>GLASSLLM_MAX_CONCURRENCY</code></td>\n<td>unset</td>"
            in text) and "divided by <code>workers</code>" in text
    path = contract.docs_dir() / "settings.md"
    written = path.read_text(encoding="utf-8")
    fresh = contract.with_settings_table(written)
    if os.environ.get("GLASSLLM_UPDATE_SNAPSHOT"):
        path.write_text(fresh, encoding="utf-8")
    assert written == fresh, "docs/settings.md's table is not the code's: rewrite it with" \
                             " GLASSLLM_UPDATE_SNAPSHOT=1"
