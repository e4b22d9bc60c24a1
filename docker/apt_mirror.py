"""Print the Debian mirror and suite this machine's apt already uses: ``URI SUITE``.

Reads /etc/apt/sources.list and /etc/apt/sources.list.d/ in both formats, one-line
(``*.list``) and deb822 (``*.sources``), and picks the first ``deb`` entry whose suite is
this machine's codename (from /etc/os-release) with the ``main`` component. No mirror
host is written in the repository: the course's own apt configuration decides.

    python3 docker/apt_mirror.py            # e.g. "http://mirror.example/debian bookworm"
    python3 docker/apt_mirror.py --root DIR # read DIR/etc/... instead (tests)

Exits 1 naming the files it read when no entry fits.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def codename(root: Path) -> str:
    """VERSION_CODENAME from os-release, e.g. ``bookworm``."""
    for line in (root / "etc/os-release").read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "VERSION_CODENAME":
            return value.strip().strip('"')
    raise SystemExit(f"no VERSION_CODENAME in {root / 'etc/os-release'}")


def one_line_entries(text: str):
    """``deb [options] URI SUITE COMPONENT...`` lines → (types, uris, suites, components)."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        kind, rest = words[0], words[1:]
        if rest and rest[0].startswith("["):          # [arch=amd64 signed-by=...]
            while rest and not rest[0].endswith("]"):
                rest = rest[1:]
            rest = rest[1:]
        if len(rest) >= 2:
            yield [kind], [rest[0]], [rest[1]], rest[2:]


def deb822_entries(text: str):
    """deb822 stanzas (``Types: / URIs: / Suites: / Components:``) → the same tuples."""
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        last = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and last:              # a continuation line
                fields[last] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            last = key.strip().lower()
            fields[last] = value.strip()
        if fields.get("enabled", "yes").lower() == "no" or "uris" not in fields:
            continue
        yield (fields.get("types", "").split(), fields["uris"].split(),
               fields.get("suites", "").split(), fields.get("components", "").split())


def find_mirror(root: Path = Path("/")) -> tuple[str, str]:
    """(URI, suite) of the first enabled ``deb`` source of this release's ``main``."""
    suite = codename(root)
    files = [root / "etc/apt/sources.list"]
    d = root / "etc/apt/sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    for f in files:
        if not f.is_file():
            continue
        text = f.read_text()
        entries = deb822_entries(text) if f.suffix == ".sources" else one_line_entries(text)
        for types, uris, suites, components in entries:
            if "deb" in types and suite in suites and "main" in components and uris:
                return uris[0], suite
    raise SystemExit(f"no 'deb' entry for {suite} main in {', '.join(map(str, files))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/"))
    uri, suite = find_mirror(parser.parse_args().root)
    print(uri, suite)


if __name__ == "__main__":
    main()
