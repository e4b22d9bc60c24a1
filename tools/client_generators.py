"""The two most used OpenAPI client generators, installed once, then run offline.

    python tools/client_generators.py install      # make test runs this (needs the network once)
    python tools/client_generators.py generate OUT  # /openapi.json → OUT/python, OUT/typescript

- openapi-python-client (PyPI), pinned `OPENAPI_PYTHON_CLIENT`, in its own venv
  ``.tools/opc`` (it brings its own pydantic, typer, ruamel; none of them leaks into
  glassllm's environment);
- openapi-typescript (npm), pinned `OPENAPI_TYPESCRIPT`, in ``.tools/npm`` (npm's cache in
  ``.tools/npm-cache``). Without npm on PATH it is skipped, with a message: the tests that
  need it say why they skip. CI machines have npm.

``.tools/`` is ignored by git. Both generators run with their default settings; the only
option given is openapi-python-client's ``post_hooks: []`` (it would otherwise look for ruff
on PATH to format the code, which changes nothing the test reads).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
OPENAPI_PYTHON_CLIENT = "0.29.1"
OPENAPI_TYPESCRIPT = "7.13.0"
OPC_VENV = TOOLS / "opc"
OPC_BIN = OPC_VENV / "bin" / "openapi-python-client"
OPC_PYTHON = OPC_VENV / "bin" / "python"
NPM_DIR = TOOLS / "npm"
OPENAPI_TS_BIN = NPM_DIR / "node_modules" / ".bin" / "openapi-typescript"


def _stamp(path: Path) -> Path:
    return path / ".installed-version"


def python_generator_ready() -> bool:
    stamp = _stamp(OPC_VENV)
    return OPC_BIN.exists() and stamp.exists() and stamp.read_text() == OPENAPI_PYTHON_CLIENT


def typescript_generator_ready() -> bool:
    stamp = _stamp(NPM_DIR)
    return OPENAPI_TS_BIN.exists() and stamp.exists() and stamp.read_text() == OPENAPI_TYPESCRIPT


def install() -> None:
    """Install both generators at their pinned versions (a no-op when they are there)."""
    TOOLS.mkdir(exist_ok=True)
    if not python_generator_ready():
        venv.create(OPC_VENV, with_pip=True, clear=True)
        subprocess.run([str(OPC_PYTHON), "-m", "pip", "install", "--quiet",
                        f"openapi-python-client=={OPENAPI_PYTHON_CLIENT}"], check=True)
        _stamp(OPC_VENV).write_text(OPENAPI_PYTHON_CLIENT)
    if not typescript_generator_ready():
        npm = shutil.which("npm")
        if npm is None:
            print("npm not found: openapi-typescript not installed (its test will skip)",
                  file=sys.stderr)
            return
        NPM_DIR.mkdir(exist_ok=True)
        (NPM_DIR / "package.json").write_text('{"private": true}\n')
        subprocess.run([npm, "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund",
                        "--cache", str(TOOLS / "npm-cache"),
                        f"openapi-typescript@{OPENAPI_TYPESCRIPT}"], check=True,
                       stdout=subprocess.DEVNULL)
        _stamp(NPM_DIR).write_text(OPENAPI_TYPESCRIPT)


def offline_env() -> dict[str, str]:
    """The environment of a generator run: no proxy, npm told not to reach the registry."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return {**env, "npm_config_offline": "true", "PIP_NO_INDEX": "1"}


def generate_python(document: Path, out: Path) -> subprocess.CompletedProcess:
    """openapi-python-client on `document`; the package lands in `out`."""
    config = out.parent / "opc-config.json"
    config.write_text(json.dumps({"post_hooks": []}))
    return subprocess.run([str(OPC_BIN), "generate", "--path", str(document), "--output-path",
                           str(out), "--overwrite", "--config", str(config)],
                          capture_output=True, text=True, env=offline_env(), timeout=600)


def generate_typescript(document: Path, out: Path) -> subprocess.CompletedProcess:
    """openapi-typescript on `document`; the types land in the file `out`."""
    return subprocess.run([str(OPENAPI_TS_BIN), str(document), "--output", str(out)],
                          capture_output=True, text=True, env=offline_env(), timeout=600)


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        install()
        return 0
    if argv[:1] == ["generate"] and len(argv) == 2:
        sys.path.insert(0, str(ROOT))
        from glassllm_service.app import create_app
        out = Path(argv[1])
        out.mkdir(parents=True, exist_ok=True)
        document = out / "openapi.json"
        document.write_text(json.dumps(create_app().openapi()))
        for result in (generate_python(document, out / "python"),
                       generate_typescript(document, out / "typescript" / "schema.d.ts")):
            print(result.stdout + result.stderr)
            if result.returncode:
                return result.returncode
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
