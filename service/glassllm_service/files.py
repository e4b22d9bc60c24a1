"""Every file the sandbox sends goes through `FileResponse` here: the page, its assets
(`StaticFiles` below), Swagger UI's assets, the wheel at ``/dist/``.

It is Starlette's file response with range requests read as RFC 9110 §14 says. Starlette
answers 400 to a ``Range`` header it cannot use (another unit such as ``items=0-5``, a
syntax error, ``bytes=5-3``), and 416 as soon as one of several ranges starts past the end.
The RFC says otherwise, and so does this class:

- a range unit other than ``bytes`` is ignored (§14.2: "An origin server MUST ignore a
  Range header field that contains a range unit it does not understand"): 200 and the
  whole file;
- a ``bytes`` range set that breaks the grammar of §14.1.1 (not ``first-last``,
  ``first-`` or ``-suffix`` with digits only, or ``last < first``) is invalid, and the
  server "MAY ignore or reject" it (§14.2): it is ignored, 200 and the whole file, as
  nginx does;
- of a valid set, the satisfiable ranges are sent (206, one part or
  ``multipart/byteranges``); ranges that start past the end are dropped (§14.1.1: a set is
  satisfiable when one of its ranges is);
- when none is satisfiable: 416 with ``Content-Range: bytes */<size>`` (§15.5.17), in the
  API's error envelope;
- more than `max_ranges` ranges: ignored, the whole file (§14.2 lets a server ignore a
  request for many small ranges).

``If-Range`` is Starlette's (a strong validator that matches, else the whole file).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from starlette import responses, staticfiles
from starlette.datastructures import Headers
from starlette.types import Scope

from glassllm_service.http_errors import ApiError

# §14.1.1: int-range = first-pos "-" [ last-pos ], suffix-range = "-" suffix-length
_RANGE_SPEC = re.compile(r"(?:([0-9]+)-([0-9]*)|-([0-9]+))")
_OWS = " \t"


def byte_ranges(header: str, size: int, max_ranges: int = 100) -> list[tuple[int, int]]:
    """The [start, end) byte ranges of `header` that a `size`-byte file can send, merged.

    Returns [] when the header is to be ignored (another unit, an invalid set, too many
    ranges): the whole file is sent. Raises `ApiError` 416 when the set is valid but no
    range is satisfiable."""
    unit, eq, spec = header.partition("=")
    if not eq or unit.strip(_OWS).lower() != "bytes":
        return []
    parts = [p.strip(_OWS) for p in spec.split(",")]
    parts = [p for p in parts if p]            # empty list elements are allowed (§5.6.1)
    if not parts or len(parts) > max_ranges:
        return []
    wanted: list[tuple[int, int]] = []
    for part in parts:
        m = _RANGE_SPEC.fullmatch(part)
        if m is None:
            return []                          # an other-range or junk: invalid, ignored
        first, last, suffix = m.groups()
        if suffix is not None:
            n = int(suffix)
            if n > 0 and size > 0:             # a suffix of 0 bytes is unsatisfiable
                wanted.append((max(size - n, 0), size))
            continue
        start = int(first)
        if last and int(last) < start:
            return []                          # last < first: invalid, ignored
        if start < size:                       # starts inside: satisfiable
            wanted.append((start, min(int(last) + 1, size) if last else size))
    if not wanted:
        raise ApiError(416, "range_not_satisfiable", f"no range of {header[:80]!r} starts"
                       f" inside the {size}-byte file; send no Range for all of it",
                       input="Range", headers={"Content-Range": f"bytes */{size}"})
    wanted.sort()
    merged = [wanted[0]]
    for start, end in wanted[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class FileResponse(responses.FileResponse):
    """Starlette's `FileResponse`, ranges read by `byte_ranges` (the module docstring).

    Starlette sends the whole file when the parser returns no range, and one part or
    ``multipart/byteranges`` otherwise; the 416 is an `ApiError`, which the app's handlers
    answer in the error envelope (the response runs inside them)."""

    @classmethod
    def _parse_range_header(cls, http_range: str, file_size: int) -> list[tuple[int, int]]:
        return byte_ranges(http_range, file_size, cls.max_ranges)


class StaticFiles(staticfiles.StaticFiles):
    """Starlette's `StaticFiles` (ETag, Last-Modified, 304), sending `FileResponse`."""

    def file_response(self, full_path: str | os.PathLike[str], stat_result: os.stat_result,
                      scope: Scope, status_code: int = 200) -> responses.Response:
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result)
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            return staticfiles.NotModifiedResponse(response.headers)
        return response


_made: list[Path] = []


def private_dir(prefix: str) -> Path:
    """A new directory in the temp dir that only this user can enter, removed by
    `remove_private_dirs` (the app's shutdown; at exit too, when the process exits normally:
    uvicorn ends on the signal it caught, which skips atexit).

    `tempfile.mkdtemp` makes it with mode 0700 under a random name, and fails over to
    another name rather than reuse anything already there; what it made is then checked
    (a directory, not a link, owned by this user, no access for group or others), so a
    file or link another local user planted can never stand in for a cache."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{path} is not a private directory of this user")
    if not _made:
        atexit.register(remove_private_dirs)
    _made.append(path)
    return path


def remove_private_dirs() -> None:
    """Remove every directory `private_dir` made in this process."""
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)


# The page (static/) and the contract (docs/) live at the repository's root; the wheel
# carries them inside this package (pyproject.toml), so an installed sandbox finds them
# here and a checkout finds them two folders up.
HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent.parent


def static_dir(configured: Path | None) -> Path:
    """The page: configured (GLASSLLM_STATIC_DIR), else shipped in the wheel, else the
    checkout's static/."""
    for candidate in (configured, HERE / "static", CHECKOUT / "static"):
        if candidate is not None and (candidate / "index.html").is_file():
            return candidate
    raise RuntimeError("static/index.html not found; set GLASSLLM_STATIC_DIR")


def docs_dir() -> Path:
    """The contract: shipped in the wheel, else the checkout's docs/."""
    for candidate in (HERE / "docs", CHECKOUT / "docs"):
        if (candidate / "index.md").is_file():
            return candidate
    raise RuntimeError("docs/index.md not found")
