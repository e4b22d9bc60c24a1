"""The "glassllm" tile of a JupyterLab launcher: jupyter-server-proxy's entry point.

With glassllm installed (``pip install "glassllm[jupyter]"``) in a JupyterLab image — a
zero-to-jupyterhub ``singleuser`` image, The Littlest JupyterHub's user environment, or a
plain ``jupyter lab`` — jupyter-server-proxy finds `setup_glassllm` through the
``jupyter_serverproxy_servers`` entry point (pyproject.toml), draws a "glassllm" tile in
the launcher, and on the first click starts the sandbox on a free port of the student's
own container and proxies ``<base_url>glassllm/`` to it (docs/jupyterhub.md).

This is **practice mode** (docs/modes.md): the student's own sandbox, no secret, nothing
hidden, no record. The mode is set here rather than inherited, so a course variable left
in the image cannot turn a student's private sandbox into a course one.

The proxy strips its prefix (``absolute_url`` off): the sandbox sees ``/``, ``/api/v1/...``
as it always does, and the page, the docs and Swagger UI make every address relative to
where they were served (static/js/base.js), so the prefix never matters. The training
stream is a Server-Sent-Events answer: the page asks for it with
``Accept: text/event-stream``, which tells jupyter-server-proxy to stream it instead of
buffering the whole answer.
"""

from __future__ import annotations

import sys
from pathlib import Path

ICON = Path(__file__).with_name("glassllm-tile.svg")
# starting the sandbox imports NumPy, FastAPI and the op table: seconds on a busy hub node
START_TIMEOUT_S = 60


def setup_glassllm() -> dict:
    """jupyter-server-proxy's server process description for the "glassllm" tile.

    ``{port}`` is filled by jupyter-server-proxy with the free port it picked; the sandbox
    listens on the loopback only (the proxy is on the same host), with one worker (one
    student). The interpreter is the one running Jupyter, so the sandbox is the glassllm
    installed beside it."""
    return {
        "command": [sys.executable, "-m", "glassllm_service.sandbox_cli",
                    "--host", "127.0.0.1", "--port", "{port}", "--workers", "1",
                    "--log-level", "warning"],
        "environment": {"GLASSLLM_MODE": "practice"},
        "timeout": START_TIMEOUT_S,
        "absolute_url": False,
        "new_browser_tab": True,
        "launcher_entry": {
            "enabled": True,
            "title": "glassllm",
            "icon_path": str(ICON),
            "category": "Notebook",
        },
    }
