"""The page's modules (P1): ES modules by job, every HTTP call in one module,
and no copy of what the server sends (op lists, input kinds). Static reads of static/js;
the behaviour itself is tested in a real browser by test_page.py."""

from __future__ import annotations

import re

from paths import ROOT

from glassllm.sandbox import registry

JS = ROOT / "static" / "js"
MODULES = {p.name: p.read_text(encoding="utf-8") for p in sorted(JS.glob("*.js"))}
KINDS = {i.kind for op in registry.OPS.values() for i in op.inputs}
# op names the page may name, each for a reason: the op shown first, the one whose -inf
# output is expected (a causal mask, L3.5) rather than a problem, and the one whose step
# the page takes apart into its terms (p, one-hot, p − one-hot, ÷ N: rule.js)
NAMED_OPS = {"softmax", "masked_fill", "cross_entropy"}


def test_the_page_is_es_modules_of_readable_size():
    html = (JS.parent / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script[^>]*>", html) == [
        '<script type="module" src="static/js/main.js">']
    assert {"api.js", "state.js", "case.js", "run.js", "messages.js", "results.js",
            "stepper.js", "share.js", "catalogue.js", "main.js"} <= set(MODULES)
    for name, src in MODULES.items():
        assert src.count("\n") <= 600, f"{name} has {src.count(chr(10))} lines"


# an address from the host's root: "/api/v1/...", '/static/...', `/docs...`, href="/..."
ABSOLUTE = re.compile(r"""["'`]/[a-z][\w.-]*(?:[/"'`?#]|$)""", re.MULTILINE)


def test_no_absolute_address_anywhere_in_the_page():
    """The sandbox may sit under a path prefix (a JupyterHub proxy tile serves it at
    /user/<name>/glassllm/): the page names every address relative to it (base.js)."""
    html = (JS.parent / "index.html").read_text(encoding="utf-8")
    sources = {"index.html": html, **MODULES}
    found = {name: ABSOLUTE.findall(src) for name, src in sources.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}
    assert "import.meta.url" in MODULES["base.js"]


def test_every_http_call_is_in_api_js():
    for name, src in MODULES.items():
        calls = re.findall(r"\b(fetch|XMLHttpRequest|sendBeacon|EventSource)\b", src)
        assert not calls or name == "api.js", f"{name} calls {calls}: use api.js"
    assert "fetch(" in MODULES["api.js"]


def test_the_state_is_declared_in_one_place():
    declared = set(re.findall(r"^  (\w+):", MODULES["state.js"], re.MULTILINE))
    used = set()
    for src in MODULES.values():
        used |= set(re.findall(r"\bstate\.(?!js\b)(\w+)", src))
    assert used <= declared, f"undeclared state fields: {sorted(used - declared)}"
    assert declared <= used, f"declared but never used: {sorted(declared - used)}"
    for name, src in MODULES.items():
        assert name == "state.js" or not re.search(r"^(?:export )?(?:const|let) state\b", src,
                                                   re.MULTILINE), name


def test_no_list_of_input_kinds_and_no_op_list_in_the_page():
    """The page reads each input's array / dtype and each op's role from GET /api/v1/ops."""
    assert len(KINDS) >= 10                                     # the scan sees the kinds
    for name, src in MODULES.items():
        for literal in re.findall(r"\[([^\[\]]*)\]", src):     # [..] and new Set([..])
            quoted = set(re.findall(r'"(\w+)"', literal))
            assert len(quoted & KINDS) < 2, f"{name}: a list of kinds {sorted(quoted & KINDS)}"
        tags = set(re.findall(r'\bel\("(\w+)"', src))             # el("div"): a tag, no op
        ops = set(re.findall(r'"(\w+)"', src)) & set(registry.OPS) - KINDS - tags
        assert ops <= NAMED_OPS, f"{name} names ops {sorted(ops - NAMED_OPS)}"
