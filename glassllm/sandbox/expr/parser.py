"""Parsing an expression: source checks (length, characters, bracket depth), then
``ast.parse(mode="eval")``, then a walk that checks every node against a whitelist.
Nothing is compiled or run."""

from __future__ import annotations

import ast
import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from glassllm.errors import echo_name
from glassllm.sandbox import registry
from glassllm.sandbox.expr.expr_errors import ExprError
from glassllm.sandbox.limits import Limits

DEFAULT_LIMITS = Limits()

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
          ast.MatMult: "matmul"}
METHODS = {"sum": "tsum", "mean": "mean", "max": "max", "reshape": "reshape",
           "transpose": "transpose"}
CONSTANT_NAMES = {"inf": math.inf, "nan": math.nan}
# Calls that are not ops: they cut the gradient's path and keep the value, as
# `Tensor.detach()` and a `with no_grad():` block do in the library (the same effect on
# the gradient; the dead-gradient report names which one cut it)
CUTS = {"detach": "detach() of", "no_grad": "no_grad around"}
ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Call, ast.Name, ast.Constant,
           ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.keyword, ast.Load,
           *BINOPS)
PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


# --------------------------------------------------------------------------------------
# parsing: source checks, then ast.parse, then a whitelist walk
# --------------------------------------------------------------------------------------

# Python's tokenizer ends a line at \r\n, \r or \n (and nothing else: not \f, \v, U+2028).
LINE_END = re.compile(r"\r\n|\r|\n")


class SourcePositions:
    """Python's source positions → offsets in the expression string (code points).

    ``ast`` gives a node's place as a 1-based line number and a column counted in UTF-8
    *bytes* from the start of that line; a `SyntaxError` gives a 1-based column counted
    in *code points*. The API reports positions as Python ``str`` indices (Unicode code
    points, docs/http.md), so both are mapped here, with lines split exactly where the
    tokenizer splits them (`LINE_END`); a tab is one character, as in the tokenizer.

    Example:
        >>> sp = SourcePositions("(é\\r+ y)")     # a carriage return ends line 1
        >>> sp.offset(2, 2), sp.char_offset(1, 1)  # y: line 2, byte 2; é: line 1, column 1
        (5, 1)
    """

    def __init__(self, source: str):
        self.source = source
        self.starts = [0] + [m.end() for m in LINE_END.finditer(source)]

    def _line(self, lineno: int) -> tuple[int, str]:
        i = min(max(lineno, 1), len(self.starts)) - 1
        end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.source)
        return self.starts[i], self.source[self.starts[i]:end]

    def offset(self, lineno: int, col_offset: int) -> int:
        """The code point offset of (line, UTF-8 byte column), as ``ast`` nodes give them."""
        start, line = self._line(lineno)
        if line.isascii():
            return start + min(max(col_offset, 0), len(line))
        prefix = line.encode("utf-8")[:max(col_offset, 0)]
        return start + len(prefix.decode("utf-8", errors="ignore"))

    def char_offset(self, lineno: int, column: int) -> int:
        """The offset of (line, 0-based code point column), as a `SyntaxError` gives them."""
        start, line = self._line(lineno)
        return start + min(max(column, 0), len(line))


@dataclass
class Parsed:
    tree: ast.Expression
    source: str
    positions: SourcePositions

    def pos(self, node: ast.AST) -> int:
        return self.positions.offset(node.lineno, node.col_offset)

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.pos(node), self.positions.offset(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]


def _fail(message: str, position: int | None = None, **kw: Any) -> ExprError:
    return ExprError(message, position=position, **kw)


def parse(expression: Any, limits: Limits = DEFAULT_LIMITS) -> Parsed:
    """Check and parse; raises `ExprError` (422) with the offending position."""
    if not isinstance(expression, str):
        raise _fail("'expression' must be a string")
    if len(expression) > limits.max_length:
        raise _fail(f"the expression has {len(expression)} characters; the limit is"
                    f" {limits.max_length}", code="expression_too_long")
    if not expression.strip():
        raise _fail("the expression is empty")
    depth = 0
    for i, ch in enumerate(expression):
        if ord(ch) not in PRINTABLE:
            raise _fail(f"character {ch!r} is not part of the expression language", i)
        if ch in "([{":
            depth += 1
            if depth > limits.max_depth:
                raise _fail(f"brackets nest deeper than {limits.max_depth}", i,
                            code="too_deep")
        elif ch in ")]}":
            depth -= 1
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        ended = "; the expression ends too soon (a missing operand?)" if not exc.offset else ""
        raise _fail(f"syntax error: {exc.msg}{ended}",
                    _syntax_error_position(expression, exc)) from None
    except (RecursionError, MemoryError, ValueError):
        raise _fail("the expression is nested too deeply to parse", code="too_deep") from None
    parsed = Parsed(tree, expression, SourcePositions(expression))
    _whitelist(parsed, limits)
    return parsed


def _syntax_error_position(source: str, exc: SyntaxError) -> int:
    """Where the parser stopped: the offending token (``*`` in ``x +* y``, ``2`` in ``1 2``,
    the unclosed ``(``), or — when the input ran out first (``x +``, ``x @``), which
    Python reports as offset 0 — the end of the expression, where the operand is missing.
    """
    if not exc.offset or not exc.lineno:
        return len(source.rstrip())
    return SourcePositions(source).char_offset(exc.lineno, exc.offset - 1)


def _whitelist(p: Parsed, limits: Limits) -> None:
    """Every node type, attribute and constant is checked; the earliest offence is reported."""
    offences: list[tuple[int, str]] = []
    methods: set[int] = set()          # ids of Attribute nodes that are the callee of a Call
    count = 0
    # (node, depth, how many left-associative operators lead straight down to it: the
    # chain a + b + c … nests one level per operator)
    stack: list[tuple[ast.AST, int, int]] = [(p.tree, 0, 0)]
    while stack:                        # iterative: a deep tree cannot overflow the stack
        node, depth, chain = stack.pop()
        if isinstance(node, ast.expr):
            count += 1
            if depth > limits.max_depth:
                hint = ("; each operator of a chain such as a + b + c is one level, so group"
                        " a long chain in brackets, e.g. (a + b) + (c + d)"
                        if 2 * chain > limits.max_depth else "")
                raise _fail(f"the expression nests deeper than {limits.max_depth} levels{hint}",
                            p.pos(node), code="too_deep")
        if count > 4 * limits.max_nodes:
            raise _fail(f"the expression has more than {4 * limits.max_nodes} parts",
                        code="too_many_nodes")
        if not isinstance(node, ALLOWED):
            offences.append((_offence_pos(p, node), _describe(node)))
            continue
        if isinstance(node, ast.Constant) and not (
                node.value is None or node.value is Ellipsis
                or isinstance(node.value, bool | int | float)):
            kind = "string" if isinstance(node.value, str | bytes) else type(node.value).__name__
            offences.append((p.pos(node), f"not part of the expression language: {kind}"
                                          " literals"))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                methods.add(id(node.func))
            elif isinstance(node.func, ast.Name) and registry.get(node.func.id) is None \
                    and node.func.id not in CUTS:
                offences.append((p.pos(node.func), not_an_op(node.func.id)))
            elif not isinstance(node.func, ast.Name):
                offences.append((p.pos(node.func), "only registry ops and the methods .sum()"
                                 " .mean() .max() .reshape() .transpose() can be called"))
            for kw in node.keywords:
                if kw.arg is None:
                    offences.append((p.pos(kw), "**keyword unpacking is not part of the"
                                                " expression language"))
        elif isinstance(node, ast.Attribute):
            called = id(node) in methods
            ok = (node.attr == "T" and not called) or (node.attr in METHODS and called)
            where = p.span(node)[1] - len(node.attr)
            if node.attr == "T" and called:
                offences.append((where, "`.T` is a property, not a method; write x.T or"
                                        " x.transpose()"))
            elif not ok:
                offences.append((where, f"attribute '.{echo_name(node.attr)}' is not allowed; only"
                                        " .T and the methods .sum() .mean() .max() .reshape()"
                                        " .transpose()"))
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            offences.append((p.pos(node), f"the name '{echo_name(node.id)}' is not allowed"))
        chained = isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Pow)
        stack.extend((child, depth + 1,        # a right operand inherits its chain's count
                      (chain + (child is node.left)) if chained else 0)
                     for child in ast.iter_child_nodes(node))
    if offences:
        pos, message = min(offences)
        raise _fail(message, pos)


def not_an_op(name: str) -> str:
    """The refusal of a call of an unknown op, with the close op names (as the 404 of
    ``GET /api/v1/ops/{name}``)."""
    close = difflib.get_close_matches(name, list(registry.OPS), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"'{echo_name(name)}' is not an op of the registry (GET /api/v1/ops lists them){hint}"


def _offence_pos(p: Parsed, node: ast.AST) -> int:
    if hasattr(node, "lineno"):
        return p.pos(node)
    return 0


def _describe(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.ListComp: "comprehensions", ast.GeneratorExp:
             "generator expressions", ast.Compare: "comparisons", ast.BoolOp: "and / or",
             ast.IfExp: "conditional expressions", ast.Starred: "* unpacking", ast.Dict:
             "dict literals", ast.Set: "set literals", ast.JoinedStr: "f-strings",
             ast.NamedExpr: ":=", ast.Await: "await"}
    what = names.get(type(node), type(node).__name__)
    return f"not part of the expression language: {what}"
