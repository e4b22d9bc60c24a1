"""The backward rule of every registry op, read from the op's own docstring.

Every op's docstring has a `Backward:` block (STYLE.md, in PyTorch's derivatives.yaml
vocabulary), one line per input: `g` is the incoming gradient (shaped like the output),
`out` the result, any other name an input's forward value; `*` multiplies elementwise,
`@` is the matrix product, `ᵀ` swaps the last two axes, `**` a power, and
`unbroadcast(·)` sums a gradient back over broadcast axes (L0.5). `GET /api/v1/ops`
serves those lines as each op's `vjp`, and the page shows them in the step-through: the
rule is written once, beside the code that computes it, and never in another notation.

    Backward:
        a: unbroadcast(g / b)
        b: unbroadcast(-g * a / b**2)
        ids: not differentiable (L0.6)

The block starts at the line `Backward:` and ends at a blank line or a line indented no
deeper than it; a line indented deeper than the rules continues the rule above it; a
rule may name several inputs (`x, wq, wk: ...`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable

__all__ = ["backward_rules", "vjp_of"]

_HEADER = re.compile(r"^(\s*)Backward:\s*$")
_RULE = re.compile(r"^([A-Za-z_]\w*(?:, [A-Za-z_]\w*)*): (.+)$")


def backward_rules(fn: Callable) -> dict[str, str]:
    """{input name: rule} from the `Backward:` block of `fn`'s docstring, each rule's
    lines joined and its runs of spaces made one; {} when there is no block.

    Raises ValueError naming the function when a line of the block is not
    `name: rule` (or `name, name: rule`) nor the continuation of one.
    """
    lines = inspect.cleandoc(fn.__doc__ or "").splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        return {}
    outer = len(_HEADER.match(lines[start]).group(1))
    rules: dict[str, list[str]] = {}
    names: list[str] = []
    indent = None  # the rules' own indent, set by the first one
    for line in lines[start + 1:]:
        depth = len(line) - len(line.lstrip())
        if not line.strip() or depth <= outer:
            break
        indent = depth if indent is None else indent
        if depth > indent and names:  # the rule above continues
            for name in names:
                rules[name].append(line.strip())
            continue
        match = _RULE.match(line.strip())
        if depth != indent or match is None:
            raise ValueError(f"{fn.__qualname__}: the Backward block's line {line.strip()!r} "
                             "is not 'name: rule', nor a deeper continuation of one")
        names = match.group(1).split(", ")
        for name in names:
            rules[name] = [match.group(2)]
    return {name: " ".join(" ".join(parts).split()) for name, parts in rules.items()}


def vjp_of(name: str, fn: Callable, differentiable: Iterable[str]) -> dict[str, str]:
    """The rule of each differentiable input of the op `name`, from `fn`'s docstring.

    Raises ValueError when one has no rule, or its rule says it is not differentiable:
    an op is added with its `Backward:` block, or not at all.
    """
    rules = backward_rules(fn)
    out = {}
    for arg in differentiable:
        rule = rules.get(arg)
        if rule is None or rule.startswith("not differentiable"):
            raise ValueError(f"op {name!r}: the Backward block of {fn.__qualname__} gives "
                             f"no rule for its differentiable input {arg!r}")
        out[arg] = rule
    return out
