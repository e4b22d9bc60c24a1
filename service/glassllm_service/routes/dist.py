"""``/dist/``: the sandbox serves its own wheel, so a notebook on a course network
with no package index can ``pip install http://sandbox:8000/dist/glassllm-<ver>-py3-none-any.whl``;
and ``/simple/``, a PEP 503 index of that wheel and a wheelhouse of the client's
dependencies (the end of this module; docs/offline-install.md).

No build tool is needed at run time, so it works the same from a source checkout and from
an installed sandbox: a wheel is a zip of the package files plus a ``.dist-info`` folder
(PEP 427), and this module writes one from the ``glassllm`` and ``glassllm_service`` packages
as they are on disk, the page's files under ``glassllm_service/static`` (where the real wheel
puts them,
pyproject.toml), and the installed distribution's own METADATA and entry points. It is
built once per worker process, on the first request, into a directory that process made
for itself (`glassllm_service.files.private_dir`: mode 0700, its owner checked, removed at
shutdown),
and served from the path it wrote — never from a name another local user could guess and
fill first in the shared temp directory. A wheel is kept per digest of its files (code
that changed gets a wheel of its own). Every worker writes the same bytes (sorted files,
fixed zip dates) and gives the file the newest source file's time, so the workers behind
one port agree on Last-Modified and ETag.
"""

from __future__ import annotations

import base64
import errno
import functools
import hashlib
import html
import importlib.metadata
import os
import re
import shutil
import sys
import threading
import zipfile
from pathlib import Path
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

import glassllm
import glassllm_service
from glassllm_service import schemas
from glassllm_service.codec import dumps
from glassllm_service.deps import SettingsDep
from glassllm_service.files import FileResponse, private_dir, static_dir
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

router = APIRouter(prefix="/dist", tags=["dist"])
_lock = threading.Lock()
PACKAGES = (Path(glassllm.__file__).parent, Path(glassllm_service.__file__).parent)


def version() -> str:
    try:
        return importlib.metadata.version("glassllm")
    except importlib.metadata.PackageNotFoundError:        # run from a bare checkout
        return "0.1.0"


def wheel_name() -> str:
    return f"glassllm-{version()}-py3-none-any.whl"


def _metadata(ver: str) -> tuple[str, str]:
    """METADATA and entry_points.txt of the installed distribution, else minimal ones.

    An editable install's METADATA requires ``editables`` (its import hook, pyproject.toml's
    dev-mode-exact); the wheel written here holds the files themselves, so that line goes."""
    try:
        dist = importlib.metadata.distribution("glassllm")
        meta, entry = dist.read_text("METADATA"), dist.read_text("entry_points.txt") or ""
        if meta:
            meta = "".join(line for line in meta.splitlines(keepends=True)
                           if not line.startswith("Requires-Dist: editables"))
            return meta, entry
    except importlib.metadata.PackageNotFoundError:
        pass
    return (f"Metadata-Version: 2.1\nName: glassllm\nVersion: {ver}\nRequires-Python: >=3.11\n"
            "Requires-Dist: numpy>=1.26\nProvides-Extra: client\n"
            "Requires-Dist: httpx>=0.27; extra == 'client'\n", "")


def _files() -> list[tuple[str, Path]]:
    """(path in the wheel, file on disk) for both packages and the page."""
    out = []
    for pkg in PACKAGES:
        for f in sorted(pkg.rglob("*")):
            rel = f.relative_to(pkg.parent)
            if f.is_file() and "__pycache__" not in rel.parts and f.suffix != ".pyc":
                out.append((rel.as_posix(), f))
    if not any(name.startswith("glassllm_service/static/") for name, _ in out):
        page = static_dir(None)
        out += [(f"glassllm_service/static/{f.relative_to(page).as_posix()}", f)
                for f in sorted(page.rglob("*")) if f.is_file()]
    return out


def build(folder: Path) -> Path:
    """Write the wheel into `folder` (PEP 427: files, then METADATA, WHEEL, RECORD)."""
    ver = version()
    info = f"glassllm-{ver}.dist-info"
    meta, entry = _metadata(ver)
    record: list[str] = []
    target = folder / wheel_name()
    partial = target.with_suffix(".part")

    def add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
        zf.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data,
                    compress_type=zipfile.ZIP_DEFLATED)

    # written beside, flushed to disk, then renamed: a full disk, a file-size limit or a
    # read-only directory leaves no partial file, and never a wheel that is not whole
    try:
        with open(partial, "wb") as out:
            with zipfile.ZipFile(out, "w") as zf:
                for name, path in _files():
                    add(zf, name, path.read_bytes())
                add(zf, f"{info}/METADATA", meta.encode())
                add(zf, f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: glassllm.service.dist\n"
                                         b"Root-Is-Purelib: true\nTag: py3-none-any\n")
                if entry:
                    add(zf, f"{info}/entry_points.txt", entry.encode())
                record.append(f"{info}/RECORD,,")
                zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                            "\n".join(record) + "\n")
            out.flush()
            os.fsync(out.fileno())
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


# The wheel cannot be written: 507 Insufficient Storage (RFC 4918 §11.5: "unable to store
# the representation needed to complete the request"), whatever the disk says; the code
# says why: no room (no space, a quota, a file-size limit) or no writable directory (read
# only, missing, no permission). Not a 503: no wait makes a read-only disk writable, and
# every 503 of this API carries a Retry-After that clients obey.
NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def storage_error(exc: OSError) -> ApiError:
    """One line saying what is wrong with the disk, with its status (never a 500)."""
    why = exc.strerror or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in NO_ROOM:
        return ApiError(507, "insufficient_storage", f"the sandbox cannot write its wheel:"
                        f" {why}{where}; free some space in its temporary directory (TMPDIR)",
                        input="filename")
    return ApiError(507, "storage_unavailable", f"the sandbox cannot write its wheel: {why}"
                    f"{where}; give it a writable temporary directory (TMPDIR)",
                    input="filename")


@functools.cache
def _content_key() -> str:
    """A digest of every file the wheel holds (names and bytes), taken once per process:
    the cache folder is named by it, so a sandbox started from other code — another
    checkout, a newer commit with the same version number — never serves a stale wheel."""
    digest = hashlib.sha256(version().encode())
    for name, path in _files():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


_built: dict[str, Path] = {}     # content key -> the wheel this process wrote


def wheel() -> Path:
    """This code's wheel, built on first use (one build at a time) into a private directory
    of this process (module docstring); later calls return the same path."""
    key = _content_key()
    with _lock:
        path = _built.get(key)
        if path is None or not path.is_file():      # first use, or removed at a shutdown
            folder = private_dir(f"glassllm-dist-{version()}-{key}-")
            try:
                path = build(folder)
            except OSError:         # a full or read-only disk: no empty folder per request
                shutil.rmtree(folder, ignore_errors=True)
                raise
            newest = max(source.stat().st_mtime for _, source in _files())
            os.utime(path, (newest, newest))
            _built[key] = path
    return path


@router.get("/", summary="The wheels this sandbox serves, and the pip command that installs one")
def list_wheels(request: Request) -> Response:
    """``{"wheels": [name], "urls": [url], "install": "pip install 'glassllm[client] @ url'"}``:
    the URL as this request reached the sandbox, and the extra named the way pip takes it
    with a URL (PEP 508's ``name[extra] @ url``; ``url[client]`` is a file that is not
    there)."""
    name = wheel_name()
    url = f"{str(request.base_url).rstrip('/')}/dist/{name}"
    return Response(dumps({"wheels": [name], "urls": [url],
                           "install": f"pip install 'glassllm[client] @ {url}'"}),
                    media_type="application/json")


_BINARY = {"schema": {"type": "string", "format": "binary"}}
_RANGE = {"Content-Range": {"schema": {"type": "string"}, "description":
                            "bytes <first>-<last>/<size>, when one range is sent"}}


@router.get("/{filename}", summary="Download the sandbox's own glassllm wheel",
            response_class=FileResponse, responses={
                200: {"description": "the wheel", "content": {
                    "application/octet-stream": _BINARY}},
                206: {"description": "the byte ranges asked for (Range: bytes=...): one, or"
                      " several as multipart/byteranges", "headers": _RANGE, "content": {
                          "application/octet-stream": _BINARY,
                          "multipart/byteranges": _BINARY}},
                **schemas.error_responses(404, 416, 507, why={
                    404: "not a file this sandbox serves (`not_found`)",
                    507: "the wheel cannot be written: no room (`insufficient_storage`), or"
                         " no writable temporary directory (`storage_unavailable`)"})})
def get_wheel(filename: str) -> FileResponse:
    if filename != wheel_name():
        raise ApiError(404, "not_found", f"no file {filename[:80]!r}; this sandbox serves"
                       f" {wheel_name()}", input="filename")
    try:
        path = wheel()
    except OSError as exc:
        raise storage_error(exc) from None
    return FileResponse(path, media_type="application/octet-stream", filename=filename)


# -- /simple/: a PEP 503 package index ---------------------------------------------------
# A course network often reaches nothing but the sandbox, and `pip install --no-index` of
# the client fails for lack of numpy. So the sandbox is the index: glassllm's own wheel
# (the one /dist/ serves, unless the wheelhouse holds a built one) and every wheel of the
# GLASSLLM_WHEELHOUSE directory (the course image fills it with the client's dependencies
# for its own platform and Python when it is built). Every link is relative, so the index
# works under a path prefix too, and each carries its file's sha256 (pip checks it).

simple_router = APIRouter(prefix="/simple", tags=["dist"], include_in_schema=False)
# PEP 427's file name: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl
WHEEL_FILE = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)-[^-]+(?:-\d[^-]*)?"
                        r"-[^-]+-[^-]+-[^-]+\.whl$")


def normalize(name: str) -> str:
    """PEP 503's normalized project name: runs of -, _ and . become one -, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=4096)
def _sha256(path: Path, mtime_ns: int, size: int) -> str:
    """The file's sha256, computed again only when the file changes (mtime, size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_wheelhouse() -> Path | None:
    """Where an installed sandbox keeps its wheelhouse when GLASSLLM_WHEELHOUSE is unset:
    the environment's share/glassllm/wheelhouse (the course image's, docker/install.sh)."""
    folder = Path(sys.prefix) / "share" / "glassllm" / "wheelhouse"
    return folder if folder.is_dir() else None


def projects(wheelhouse: Path | None) -> dict[str, dict[str, Path | None]]:
    """Normalized project → {file name → path}; glassllm's own wheel is None: built on
    first use, as /dist/ builds it."""
    wheelhouse = wheelhouse or default_wheelhouse()
    out: dict[str, dict[str, Path | None]] = {}
    for f in sorted(wheelhouse.glob("*.whl")) if wheelhouse else ():
        m = WHEEL_FILE.match(f.name)
        if m and f.is_file():
            out.setdefault(normalize(m.group(1)), {})[f.name] = f
    out.setdefault("glassllm", {wheel_name(): None})
    return out


def _page(title: str, links: list[tuple[str, str]]) -> HTMLResponse:
    body = "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a><br>\n'
                   for href, text in links)
    return HTMLResponse('<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version"'
                        f' content="1.0"><title>{html.escape(title)}</title></head>\n'
                        f"<body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


def _file(project: str, filename: str, settings: Settings) -> Path:
    files = projects(settings.wheelhouse).get(normalize(project), {})
    if filename not in files:
        raise ApiError(404, "not_found", f"no file {filename[:80]!r} of {project[:80]!r} in"
                       " this sandbox's index", input="filename")
    path = files[filename]
    if path is None:
        try:
            path = wheel()
        except OSError as exc:
            raise storage_error(exc) from None
    return path


@simple_router.get("/")
def simple_root(settings: SettingsDep) -> HTMLResponse:
    return _page("Simple index", [(f"{name}/", name) for name in projects(settings.wheelhouse)])


@simple_router.get("/{project}")
def simple_slash(project: str) -> RedirectResponse:
    return RedirectResponse(f"{quote(project)}/", status_code=301)  # relative: any prefix


@simple_router.get("/{project}/")
def simple_project(project: str, settings: SettingsDep) -> Response:
    name = normalize(project)
    files = projects(settings.wheelhouse).get(name)
    if files is None:
        raise ApiError(404, "not_found", f"no project {project[:80]!r} in this sandbox's"
                       " index", input="project")
    if name != project:                             # PEP 503: the normalized name's page
        return RedirectResponse(f"../{name}/", status_code=301)
    links = []
    for filename in files:
        path = _file(name, filename, settings)
        stat = path.stat()
        links.append((f"{filename}#sha256={_sha256(path, stat.st_mtime_ns, stat.st_size)}",
                      filename))
    return _page(f"Links for {name}", links)


@simple_router.get("/{project}/{filename}")
def simple_file(project: str, filename: str, settings: SettingsDep) -> FileResponse:
    return FileResponse(_file(project, filename, settings), filename=filename,
                        media_type="application/octet-stream")
