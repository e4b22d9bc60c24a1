"""Files over real HTTP: Range requests as RFC 9110 §14 reads them on every route that
serves files (glassllm_service/files.py), and the /dist/ wheel cache that only this process wrote.

Range: a unit other than ``bytes`` is ignored (200, the whole representation: "An origin
server MUST ignore a Range header field that contains a range unit it does not
understand", §14.2), for GET and HEAD; an invalid ``bytes`` set is ignored too; a valid set
sends its satisfiable ranges (206), and a set with none is 416 with ``Content-Range: bytes
*/<size>`` in the error envelope. Starlette answered 400 to the first two and 416 to a set
of which one range was past the end.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from io import BytesIO

import httpx
import pytest
from paths import ROOT
from sandbox_server import running_sandbox

from glassllm_service.routes import dist

# every route that answers with a file on disk (FileResponse / StaticFiles)
FILES = ["/", "/static/index.html", "/static/playground.css", "/static/js/api.js",
         "/docs-assets/swagger-ui.css", "/docs-assets/favicon.png", "WHEEL"]
# and the generated pages and documents, which have no ranges: Range changes nothing
GENERATED = ["/docs", "/docs/contract/", "/docs/contract/http", "/openapi.json", "/healthz",
             "/api/v1/ops", "/api/v1/ops/add", "/dist/"]
OTHER_UNITS = ["items=0-5", "none", "pages=1-2", "=0-5", "0-5", "bytes2=0-5",
               "x-bytes=0-5, 7-9"]
INVALID_BYTES = ["bytes=5-3", "bytes=abc", "bytes=1-2-3", "bytes= -", "bytes=", "bytes=,",
                 "bytes=0-5;x", "bytes=+1-5", "bytes=1_0-20", "bytes=0x10-20", "bytes=0-1, a",
                 "bytes=0-1,9-4"]


@pytest.fixture(scope="module")
def site(url):
    name = httpx.get(f"{url}/dist/").json()["wheels"][0]
    whole = {}
    for path in FILES + GENERATED:
        path = f"/dist/{name}" if path == "WHEEL" else path
        r = httpx.get(url + path)
        assert r.status_code == 200, path
        whole[path] = r.content
    return url, name, whole


def _path(path: str, name: str) -> str:
    return f"/dist/{name}" if path == "WHEEL" else path


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("header", OTHER_UNITS + INVALID_BYTES)
def test_a_range_of_another_unit_or_an_invalid_byte_range_is_ignored(site, method, header):
    url, name, whole = site
    with httpx.Client(base_url=url) as c:
        for path in FILES + GENERATED:
            path = _path(path, name)
            r = c.request(method, path, headers={"Range": header})
            assert r.status_code == 200, (path, header, r.status_code, r.text[:200])
            assert "content-range" not in r.headers, (path, header)
            if method == "GET":
                assert r.content == whole[path], (path, header)
            else:
                assert r.content == b""
                assert int(r.headers["content-length"]) == len(whole[path]), path


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_valid_byte_range_is_sent_from_every_file(site, method):
    url, name, whole = site
    with httpx.Client(base_url=url) as c:
        for path in FILES:
            path = _path(path, name)
            data, n = whole[path], len(whole[path])
            assert c.head(path).headers["accept-ranges"] == "bytes"
            for header, (start, end) in {"bytes=0-9": (0, 10), "Bytes=3-": (3, n),
                                         "bytes=-4": (n - 4, n), f"bytes=5-{n + 100}": (5, n),
                                         f"bytes=0-1, {n}-{n + 9}": (0, 2),   # one satisfiable
                                         f"bytes=-{n + 50}": (0, n), "bytes=2-4,,": (2, 5),
                                         "bytes=0-3, 2-6": (0, 7)}.items():   # merged
                r = c.request(method, path, headers={"Range": header})
                assert r.status_code == 206, (path, header, r.status_code)
                assert r.headers["content-range"] == f"bytes {start}-{end - 1}/{n}", header
                assert int(r.headers["content-length"]) == end - start
                assert r.content == (data[start:end] if method == "GET" else b"")


def test_several_ranges_come_as_multipart_byteranges(site):
    url, _, whole = site
    data = whole["/static/playground.css"]
    r = httpx.get(f"{url}/static/playground.css", headers={"Range": "bytes=0-4, 10-14"})
    assert r.status_code == 206
    assert r.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert data[0:5] in r.content and data[10:15] in r.content
    parts = re.findall(rb"Content-Range: bytes (\d+)-(\d+)/(\d+)", r.content, re.I)
    assert parts == [(b"0", b"4", str(len(data)).encode()),
                     (b"10", b"14", str(len(data)).encode())]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_set_with_no_satisfiable_range_is_416_in_the_error_envelope(site, method):
    url, name, whole = site
    with httpx.Client(base_url=url) as c:
        for path in FILES:
            path = _path(path, name)
            n = len(whole[path])
            for header in (f"bytes={n}-", f"bytes={n + 5}-{n + 9}", "bytes=-0",
                           f"bytes={n}-{n}, {n + 1}-"):
                r = c.request(method, path, headers={"Range": header})
                assert r.status_code == 416, (path, header, r.status_code)
                assert r.headers["content-range"] == f"bytes */{n}"
                if method == "GET":
                    err = r.json()["error"]
                    assert (err["code"], err["input"]) == ("range_not_satisfiable", "Range")


def test_if_range_that_does_not_match_sends_the_whole_file(site):
    url, name, whole = site
    path = f"/dist/{name}"
    etag = httpx.head(url + path).headers["etag"]
    assert httpx.get(url + path, headers={"Range": "bytes=0-9", "If-Range": etag}
                     ).status_code == 206
    r = httpx.get(url + path, headers={"Range": "bytes=0-9", "If-Range": '"other"'})
    assert r.status_code == 200 and r.content == whole[path]


def test_every_file_is_served_through_the_one_range_aware_response():
    """The kind, not the routes: no module of the service sends a file with Starlette's own
    FileResponse or StaticFiles (they answer 400 to another unit); glassllm_service/files.py
    does."""
    root = ROOT / "service" / "glassllm_service"
    for source in root.rglob("*.py"):
        if source.name == "files.py":
            continue
        text = source.read_text(encoding="utf-8")
        for line in text.splitlines():
            if line.startswith(("from starlette", "from fastapi", "import starlette")):
                assert "FileResponse" not in line and "StaticFiles" not in line, (source, line)


# --------------------------------------------------------------------------------------
# the /dist/ cache: a directory this process made, never a guessable path in /tmp
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("plant", ["file", "symlink"])
def test_a_file_planted_at_a_predictable_temp_path_is_never_served(tmp_path, plant):
    """Another local user can create files in the shared temp directory before the sandbox
    does. Plant the wheel (a file, or a link to a file) at the path the cache used to have:
    the sandbox serves only the wheel it wrote itself, from a 0700 folder it made, removed
    at exit."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fake = tmp_path / "evil.whl"
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("glassllm/__init__.py", "print('planted')\n")
    fake.write_bytes(buf.getvalue())
    dist._content_key.cache_clear()
    folder = tmp / f"glassllm-dist-{dist.version()}-{dist._content_key()}"
    folder.mkdir()
    target = folder / dist.wheel_name()
    if plant == "file":
        target.write_bytes(fake.read_bytes())
    else:
        target.symlink_to(fake)
    before = set(tmp.iterdir())
    with running_sandbox(env={"TMPDIR": str(tmp)}) as url:
        r = httpx.get(f"{url}/dist/{dist.wheel_name()}")
        assert r.status_code == 200
        assert r.content != fake.read_bytes()
        names = zipfile.ZipFile(BytesIO(r.content)).namelist()
        assert "glassllm/modules.py" in names and "glassllm_service/app.py" in names
        made = [p for p in set(tmp.iterdir()) - before if p.name.startswith("glassllm-dist-")]
        assert len(made) == 1
        st = os.lstat(made[0])
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.geteuid()
        assert (made[0] / dist.wheel_name()).read_bytes() == r.content
    assert not made[0].exists()                     # removed when the sandbox stopped
