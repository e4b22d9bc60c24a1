"""A submission as the grader reads it, never running it here: a Python file, a
notebook (its code cells, read with the standard library's json; IPython's magics and
shell escapes are not run), or a JSON of claimed arrays.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from glassllm.errors import LimitError, WireError
from glassllm.sandbox.wire import coerce

__all__ = ["MAX_BYTES", "SubmissionError", "as_array", "claimed_arrays", "code_chunks",
           "read_bytes"]

MAX_BYTES = 16 << 20               # the largest submission file read
_MAGIC = re.compile(r"^(\s*)(%|!|\?)")


class SubmissionError(ValueError):
    """A submission file that cannot be read: the reason, for the student."""


def read_bytes(path: Path) -> bytes:
    """A submission file's bytes, at most `MAX_BYTES`; `SubmissionError` otherwise."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SubmissionError(f"{path.name} cannot be read: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise SubmissionError(f"{path.name} is larger than {MAX_BYTES} bytes")
    return data


def code_chunks(path: Path) -> tuple[list[dict], bool]:
    """The code to run, as chunks ``{name, source}``, and whether it is a notebook's.

    A ``.py`` file is one chunk named after the file; a ``.ipynb`` notebook gives one
    chunk per code cell (``cell 3``), where a line of IPython syntax (``%magic``,
    ``%%cell magic``, ``!shell``, ``?help``) becomes ``pass``: never run, and the
    line numbers stay those of the cell."""
    data = read_bytes(path)
    if path.suffix != ".ipynb":
        return [{"name": path.name, "source": data.decode("utf-8", "replace")}], False
    try:
        notebook = json.loads(data)
        cells = notebook["cells"]
    except (ValueError, KeyError, TypeError):
        raise SubmissionError(f"{path.name} is not a notebook (nbformat 4 JSON with"
                              " cells)") from None
    chunks = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if source.lstrip().startswith("%%"):
            continue                                   # a cell magic: not Python
        lines = [_MAGIC.sub(lambda m: m.group(1) + "pass  # ", line)
                 if _MAGIC.match(line) else line for line in source.split("\n")]
        chunks.append({"name": f"cell {number}", "source": "\n".join(lines)})
    return chunks, True


def claimed_arrays(path: Path) -> dict[str, Any]:
    """The claimed arrays of a JSON submission: ``{"answers": {key: array}}`` or
    ``{key: array}``; an array is nested lists of numbers, or the sandbox's encoded
    array (``{"dtype", "shape", "data"}``)."""
    try:
        body = json.loads(read_bytes(path))
    except ValueError as exc:
        raise SubmissionError(f"{path.name} is not JSON: {exc}") from None
    if isinstance(body, dict) and isinstance(body.get("answers"), dict):
        body = body["answers"]
    if not isinstance(body, dict):
        raise SubmissionError(f"{path.name} must hold an object of answers by key")
    return body


def as_array(key: str, value: Any, max_elements: int) -> np.ndarray:
    """One claimed array as float64, read as the sandbox reads an array (nested lists,
    ``"NaN"`` / ``"Infinity"`` tokens, or ``{"dtype", "shape", "base64"}``); raises
    SubmissionError naming `key` and the rule."""
    try:
        out = coerce("array", key, value, max_elements=max_elements)
    except (WireError, LimitError) as exc:
        raise SubmissionError(str(exc)) from None
    return np.asarray(out, dtype=np.float64)
