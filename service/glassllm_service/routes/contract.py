"""The contract (``docs/*.md``) as HTML at ``/docs/contract/`` (H7): readable offline.

``/docs`` stays FastAPI's Swagger UI; the contract lives beside it. Each page is rendered
once, with markdown-it-py (CommonMark plus tables), and kept in memory.

Anchors are stable, so the code, the tests and the page can link to a clause:

- a heading that starts with a clause id gets that id (``## L3 Embedding …`` -> ``#L3``);
- a list item that starts with a bold clause id gets it (``- **L3.5** …`` -> ``#L3.5``);
- any other heading gets its text as a slug (``### softmax`` -> ``#softmax``);
- every other clause id in the prose links to its anchor (``(L1.2)`` -> ``library#L1.2``).

``<!-- inputs: NAME -->`` in ``library.md`` becomes the table of op NAME's inputs, read
from the registry; the table between ``<!-- settings -->`` and ``<!-- /settings -->`` in
``settings.md`` is written afresh from `glassllm_service.settings.Settings` (the file holds
the same table for a reader of the repository, and a test keeps the two equal): the docs
never restate by hand what the code already knows (a default written twice drifts). Links
between the Markdown files (``http.md#H5``) become links between the served pages.
"""

from __future__ import annotations

import ast
import functools
import html
import re
from pathlib import Path

from fastapi import APIRouter, HTTPException
from markdown_it import MarkdownIt
from markdown_it.token import Token
from starlette.responses import HTMLResponse, RedirectResponse

from glassllm.sandbox import registry
from glassllm_service.course_state import spread
from glassllm_service.deps import CourseDep
from glassllm_service.files import docs_dir
from glassllm_service.settings import ENV_PREFIX

HERE = Path(__file__).resolve().parent.parent
CLAUSE = re.compile(r"^([LHP](?:0|[1-9][0-9]*)(?:\.[0-9]+)?)\b")
INPUTS = re.compile(r"^<!-- inputs: ([a-z_]+) -->$", re.MULTILINE)
MD_LINK = re.compile(r"^([a-z0-9-]+)\.md(#.*)?$")

router = APIRouter(prefix="/docs/contract", include_in_schema=False)




@functools.cache
def pages() -> dict[str, str]:
    """URL name → docs file stem: every ``docs/*.md`` is served, the index at ``/``, so a
    link between them (``serving.md#...``) always lands on a page."""
    stems = sorted(p.stem for p in docs_dir().glob("*.md"))
    return {("" if stem == "index" else stem): stem for stem in stems}


def inputs_table(name: str) -> str:
    """The Markdown table of one registry op's inputs."""
    op = registry.OPS[name]
    rows = ["| input | kind | shape | gradient | default | meaning |", "|---|---|---|---|---|---|"]
    for i in op.inputs:
        default = "required" if i.required else f"`{i.default!r}`"
        grad = "yes" if i.differentiable else "no"
        doc = i.doc.replace("|", r"\|")
        rows.append(f"| `{i.name}` | {i.kind} | {i.shape or ''} | {grad} | {default} | {doc} |")
    returns = "an `np.ndarray`, no gradients" if op.output == "ndarray" else "a `Tensor`"
    return (f"\n*Inputs* (`{op.module}.{op.name}`, returns {returns}; source:"
            f" {op.clause}):\n\n" + "\n".join(rows) + "\n")


CLAUSE_IN_TEXT = re.compile(r"\b([LHP](?:0|[1-9][0-9]*)(?:\.[0-9]+)?)\b")
PART_PAGE = {"L": "library", "H": "http", "P": "page"}


def _text(content: str) -> Token:
    return Token("text", "", 0, content=content)


def _link_clauses(inline: Token, page: str) -> None:
    """Each clause id in the prose (not in code, not already in a link) links to its anchor."""
    out: list[Token] = []
    depth = 0
    for child in inline.children or []:
        depth += {"link_open": 1, "link_close": -1}.get(child.type, 0)
        if child.type != "text" or depth or not CLAUSE_IN_TEXT.search(child.content):
            out.append(child)
            continue
        at = 0
        for m in CLAUSE_IN_TEXT.finditer(child.content):
            out.append(_text(child.content[at:m.start()]))
            target = PART_PAGE[m.group(1)[0]]
            href = ("" if target == page else target) + f"#{m.group(1)}"
            out += [Token("link_open", "a", 1, attrs={"href": href, "class": "clause"}),
                    _text(m.group(1)), Token("link_close", "a", -1)]
            at = m.end()
        out.append(_text(child.content[at:]))
    inline.children = out


SETTINGS = re.compile(r"<!-- settings -->\n.*?<!-- /settings -->", re.DOTALL)


def _default(value: object) -> str:
    """A default as the environment would write it: 8 388 608, 2.5, 0 / 1, "plain"."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ")
    if isinstance(value, float):
        return f"{value:g}"
    return f"{value}" if value != "" else "empty"


def settings_table() -> str:
    """The Markdown table of every setting, from `Settings` and glassllm_service/settings.py:
    each field's variable, its default (the value the code gives it) and its docstring."""
    from glassllm_service.settings import Settings

    source = (HERE / "settings.py").read_text(encoding="utf-8")
    cls = next(n for n in ast.parse(source).body
               if isinstance(n, ast.ClassDef) and n.name == "Settings")
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for field, after in zip(cls.body, [*cls.body[1:], None], strict=True):
        if not (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)):
            continue
        doc = after.value.value if (isinstance(after, ast.Expr) and isinstance(
            after.value, ast.Constant) and isinstance(after.value.value, str)) else ""
        default = _default(Settings.model_fields[field.target.id].default)
        words = " ".join(doc.split()).replace("|", r"\|")
        rows.append(f"| `{ENV_PREFIX}{field.target.id.upper()}` | {default} | {words} |")
    return "\n".join(rows) + "\n"


def with_settings_table(text: str) -> str:
    """`text` with its settings block (if any) written afresh from the code."""
    return SETTINGS.sub(lambda m: f"<!-- settings -->\n{settings_table()}<!-- /settings -->",
                        text)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")


def _anchor(tokens: list[Token], page: str) -> None:
    """Give headings and clause list items their ids (see the module docstring), and link
    the clause ids of the prose."""
    for k, tok in enumerate(tokens):
        if tok.type == "heading_open":
            text = tokens[k + 1].content
            match = CLAUSE.match(text)
            tok.attrSet("id", match.group(1) if match else _slug(text))
        elif tok.type == "list_item_open" and k + 2 < len(tokens):
            inline = tokens[k + 2]
            kids = [c for c in inline.children or [] if c.type != "text" or c.content]
            if (inline.type == "inline" and len(kids) >= 2 and kids[0].type == "strong_open"
                    and (match := CLAUSE.match(kids[1].content))
                    and match.group(1) == kids[1].content):
                tok.attrSet("id", match.group(1))
        elif tok.type == "inline":
            for child in tok.children or []:
                href = child.attrGet("href") if child.type == "link_open" else None
                if href and (m := MD_LINK.match(str(href))):
                    served = "./" if m.group(1) == "index" else m.group(1)
                    child.attrSet("href", served + (m.group(2) or ""))
            if k == 0 or tokens[k - 1].type != "heading_open":
                _link_clauses(tok, page)


STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; color: #1b1f24; max-width: 60rem;
       margin: 0 auto; padding: 1rem 1.5rem 4rem; }
nav { border-bottom: 1px solid #d0d7de; padding-bottom: .5rem; margin-bottom: 1rem; }
nav a { margin-right: 1rem; }
a { color: #0b5cad; }
code, pre { font: 0.9em ui-monospace, monospace; background: #f3f5f7; }
pre { padding: .6rem .8rem; overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left;
         vertical-align: top; }
li[id]:target, h2:target, h3:target { background: #fff3c4; }
h3 { margin-top: 2rem; border-top: 1px solid #eaeef2; padding-top: 1rem; }
"""


SECTION = re.compile(r"^### ([a-z_]+)\n(.*?)(?=^#{2,3} |\Z)", re.MULTILINE | re.DOTALL)
GRADIENT_WORDS = re.compile(r"backward|gradient|\bgrads?\b|\.grad|derivative|jacobian|∂|"
                            r"\bvjp\b|scatter-add|contributions", re.IGNORECASE)
# op names that are plain words of the prose ("the mean over rows", "a linear layer"): they
# count as a mention only written as code or as a table cell; every other name also in
# prose, with its underscore as a hyphen, a space or nothing (cross-entropy, RMSNorm)
PLAIN_WORDS = frozenset({"add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "pow",
                         "mean", "max", "reshape", "transpose", "where", "embedding",
                         "linear", "attention"})
LIST_ITEM = re.compile(r"^(\s*(?:[-*]|\d+\.)\s+)(\*\*([LHP][0-9.]+)\*\*)?")


def _mention(op: str) -> re.Pattern:
    code = rf"`[^`\n]*(?<![\w.]){op}(?!\w)[^`\n]*`|\|\s*`?{op}`?\s*\|"
    if op in PLAIN_WORDS:
        return re.compile(code)
    prose = r"[_\- ]?".join(re.escape(part) for part in op.split("_"))
    return re.compile(rf"{code}|(?<![\w-]){prose}(?![\w-])", re.IGNORECASE)


# a section's heading (## and deeper: the page's title names the page, not a section)
HEADING = re.compile(r"^#{2,6}\s")


def _heading_mention(op: str) -> re.Pattern:
    """`op` named in a heading, where a plain word is the op's name too ("The attention's
    core", "## `glassllm.fast.fused.attention`"): what the section under it says of a
    gradient speaks of that op's rule, whether or not its paragraphs name the op again."""
    prose = r"[_\- ]?".join(re.escape(part) for part in op.split("_"))
    return re.compile(rf"(?<![\w-]){prose}(?![\w-])", re.IGNORECASE)


def _units(text: str) -> list[tuple[str, str]]:
    """`text` cut into what a hidden rule can take out whole: (kind, text) for each
    heading, fenced code block, list item, table row and paragraph, and the blank lines
    between them (kind "keep"), so that joining the texts gives `text` back."""
    units: list[tuple[str, str]] = []
    lines = text.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("```"):
            j = k + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            units.append(("code", "".join(lines[k:j + 1])))
            k = j + 1
        elif not line.strip() or line.startswith("#") or line.startswith("<!--"):
            units.append(("keep", line))
            k += 1
        elif line.startswith("|"):
            units.append(("row", line))
            k += 1
        else:
            kind = "item" if LIST_ITEM.match(line) and LIST_ITEM.match(line).group(1) else "para"
            j = k + 1
            while j < len(lines) and lines[j].strip() and not lines[j].startswith(
                    ("#", "|", "```", "<!--")) and not (LIST_ITEM.match(lines[j]) and re.match(
                        r"\s*(?:[-*]|\d+\.)\s", lines[j])):
                j += 1
            units.append((kind, "".join(lines[k:j])))
            k = j
    return units


def without_rules(text: str, rules: dict[str, tuple[str, ...]]) -> str:
    """`text` without what speaks of a backward rule an open exercise hides (course mode,
    docs/modes.md; `rules`: op → the exercises hiding its rule, carried to every op that
    runs it). Taken out, each replaced by a line naming the exercises:

    - the section ``### op`` of each such op (its formula, its **Backward:** lines), all
      but its inputs table;
    - every paragraph, list item, table row and code block that names such an op (as
      code, as a table cell, or in prose: cross-entropy, RMSNorm) and speaks of a
      gradient (backward, gradient, grad, ∂, Jacobian, scatter-add, ...);
    - the clause items of such an op and of its examples (L3.2, "the backward
      scatter-adds") that speak of a gradient, whether they name it or not;
    - under a heading that names such an op (plain words included: "The attention's
      core"), every unit that speaks of a gradient, whether it names the op or not;
    - the op's rule wherever it is quoted as the registry writes it (its ``vjp`` text).
    """
    if not rules:
        return text

    def note(ops: list[str]) -> str:
        who = sorted({ex for op in ops for ex in rules[op]})
        return (f"*The backward rule of {', '.join(ops)}: not shown while exercise"
                f" {', '.join(who)} is open (docs/modes.md).*")

    def section(m: re.Match) -> str:
        if m.group(1) not in rules:
            return m.group(0)
        inputs = "".join(INPUTS.findall(m.group(2)) and
                         [f"<!-- inputs: {n} -->\n" for n in INPUTS.findall(m.group(2))])
        return f"### {m.group(1)}\n{note([m.group(1)])}\n{inputs}\n"

    text = SECTION.sub(section, text)
    mentions = {op: _mention(op) for op in rules}
    clauses: dict[str, list[str]] = {}
    for op in rules:
        spec = registry.OPS.get(op)
        for clause in {spec.clause, *(e.clause for e in spec.examples)} if spec else ():
            if clause:
                clauses.setdefault(clause, []).append(op)
    headed = {op: _heading_mention(op) for op in rules}
    out = []
    under: list[str] = []       # the hidden ops the heading over this unit names
    for kind, unit in _units(text):
        if kind == "keep" and HEADING.match(unit):
            under = [op for op, pattern in headed.items() if pattern.search(unit)]
        if kind == "keep" or not GRADIENT_WORDS.search(unit):
            out.append(unit)
            continue
        ops = sorted({*under, *(op for op, pattern in mentions.items() if pattern.search(unit))})
        item = LIST_ITEM.match(unit) if kind == "item" else None
        if item and item.group(3) in clauses:
            ops = sorted({*ops, *clauses[item.group(3)]})
        if not ops:
            out.append(unit)
        elif kind == "row":
            cells = unit.strip().strip("|").split("|")
            out.append("| " + " | ".join([note(ops), *(["—"] * (len(cells) - 1))]) + " |\n")
        elif item:
            clause = f"{item.group(2)} " if item.group(2) else ""
            out.append(f"{item.group(1)}{clause}{note(ops)}\n")
        else:
            out.append(f"{note(ops)}\n")
    text = "".join(out)
    for op in rules:            # a rule quoted as the registry writes it, anywhere
        spec = registry.OPS.get(op)
        for rule in sorted(spec.vjp.values() if spec else (), key=len, reverse=True):
            if len(rule) >= 8:
                text = text.replace(rule, f"(the rule of {op}: not shown while exercise"
                                          f" {', '.join(rules[op])} is open)")
    return text


@functools.lru_cache(maxsize=32)
def render(name: str, rules: tuple = ()) -> str:
    """One docs page as a whole HTML document; `rules`: (op, exercise ids) pairs whose
    backward rule an open exercise hides."""
    text = (docs_dir() / f"{name}.md").read_text(encoding="utf-8")
    if rules:
        text = without_rules(text, dict(rules))
    text = INPUTS.sub(lambda m: inputs_table(m.group(1)), text)
    text = with_settings_table(text)
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = md.parse(text)
    _anchor(tokens, name)
    body = md.renderer.render(tokens, md.options, {})
    title = text.splitlines()[0].lstrip("# ").strip()
    nav = " ".join(f'<a href="{href}">{label}</a>' for href, label in (
        ("./", "Contract"), ("library", "Library (L)"), ("http", "HTTP (H)"),
        ("page", "Page (P)"), ("../../", "Playground"), ("../../docs", "API (Swagger UI)")))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)} — glassllm</title><style>{STYLE}</style></head>"
            f"<body><nav>{nav}</nav><main>{body}</main></body></html>\n")


@router.get("", response_class=RedirectResponse)
def contract_root() -> RedirectResponse:
    return RedirectResponse("contract/")    # relative: the sandbox may sit under a prefix


@router.get("/", response_class=HTMLResponse)
def contract_index(course: CourseDep) -> HTMLResponse:
    return HTMLResponse(render("index", _rules(course)))


def _rules(course) -> tuple:
    """(op, exercise ids) of every op whose backward rule open exercises hide now, carried
    to the ops that run it (`spread`), as a cache key."""
    return tuple(sorted(spread(course.hidden(), "rule").items()))


@router.get("/{page}", response_class=HTMLResponse)
def contract_page(page: str, course: CourseDep) -> HTMLResponse:
    name = pages().get(page)
    if name is None:
        raise HTTPException(404, f"no contract page {page[:40]!r}; the pages are "
                            + ", ".join(n for n in pages() if n))
    return HTMLResponse(render(name, _rules(course)))
