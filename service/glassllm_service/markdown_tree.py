"""An exercise's Markdown as a tree of plain data the page builds with DOM calls: no HTML.

markdown-it-py parses the text (CommonMark and tables, raw HTML off: ``<script>`` in an
exercise file stays the text "<script>"), and its tokens become nested lists:
``["p", {}, "text", ["code", {}, "x @ w"], ...]``, each element a tag of `TAGS` with only
the attributes listed there. The page turns each into an element with
``document.createElement`` and each string into a text node, so no string of an exercise
file ever reaches the page as HTML. A link keeps its href only for http(s), a path or an
anchor (markdown-it already refuses ``javascript:``).

Example:
    >>> tree("Hello *world* <b>bold</b>")
    [['p', {}, 'Hello ', ['em', {}, 'world'], ' <b>bold</b>']]
"""

from __future__ import annotations

import functools
import re
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["tree"]

TAGS = {"p": (), "em": (), "strong": (), "code": (), "pre": (), "blockquote": (),
        "ul": (), "ol": ("start",), "li": (), "a": ("href",), "br": (), "hr": (),
        "h3": (), "h4": (), "h5": (), "h6": (), "table": (), "thead": (), "tbody": (),
        "tr": (), "th": (), "td": (), "s": ()}
# headings sit under the exercise's own title: # becomes h3, ## h4, ...
HEADING = {"h1": "h3", "h2": "h4", "h3": "h5", "h4": "h6", "h5": "h6", "h6": "h6"}
SAFE_HREF = re.compile(r"^(https?://|/|#|\./|\.\./)|^[^:]*$", re.IGNORECASE)


@functools.cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"])


def _attrs(tag: str, token: Any) -> dict:
    out = {}
    for name in TAGS.get(tag, ()):
        value = token.attrGet(name)
        if value is None:
            continue
        value = str(value)
        if name == "href" and not SAFE_HREF.match(value):
            continue
        out[name] = value
    return out


def _inline(children: list, into: list) -> None:
    stack = [into]
    for tok in children:
        if tok.type in ("text", "html_inline"):
            stack[-1].append(tok.content)
        elif tok.type == "code_inline":
            stack[-1].append(["code", {}, tok.content])
        elif tok.type in ("softbreak",):
            stack[-1].append("\n")
        elif tok.type == "hardbreak":
            stack[-1].append(["br", {}])
        elif tok.type == "image":            # no images: their alt text
            stack[-1].append(tok.content)
        elif tok.nesting == 1 and tok.tag in TAGS:
            node = [tok.tag, _attrs(tok.tag, tok)]
            stack[-1].append(node)
            stack.append(node)
        elif tok.nesting == -1 and tok.tag in TAGS and len(stack) > 1:
            stack.pop()


def tree(text: str) -> list:
    """`text` (Markdown) as the page's tree (the module docstring)."""
    root: list = []
    stack = [root]
    for tok in _parser().parse(text):
        tag = HEADING.get(tok.tag, tok.tag)
        if tok.type == "inline":
            _inline(tok.children or [], stack[-1])
        elif tok.type in ("fence", "code_block"):
            stack[-1].append(["pre", {}, ["code", {}, tok.content]])
        elif tok.type == "html_block":
            stack[-1].append(["p", {}, tok.content])
        elif tok.hidden:                     # a tight list's paragraphs: no <p>
            continue
        elif tok.type == "hr":
            stack[-1].append(["hr", {}])
        elif tok.nesting == 1 and tag in TAGS:
            node = [tag, _attrs(tag, tok)]
            stack[-1].append(node)
            stack.append(node)
        elif tok.nesting == -1 and tag in TAGS and len(stack) > 1:
            stack.pop()
    return root
