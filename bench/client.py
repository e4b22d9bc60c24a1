"""glassllm.apps.client's costs. Prints figures; asserts nothing.

    .venv/bin/python bench/client.py [--torch-python /tmp/torchvenv/bin/python] [-n 40]

1. A (256, 256) @ (256, 256) matmul, forward and backward, through the client with base64
   arrays, against the in-process floor (base64 decode, NumPy forward and backward, base64
   encode: the work no server can skip) — target <= 1.2x.
2. The same through a plain PyTorch-behind-FastAPI endpoint taking JSON lists (what a user
   would otherwise write) — target: the client >= 10x its requests per second — and a peer
   endpoint taking base64 arrays (the standard library's base64, as a user would write
   it) — target: the client no slower than 1.3x it. The peers run
   in their own venv (bench/torch_peer.py); skipped when --torch-python is missing.
3. A small request (softmax of (4, 8)) through the client against the same request made
   with raw httpx (json.dumps, post, .json(), np.array) — target <= 1.1x.

One client, requests one after another: requests per second = 1 / the median round trip.
BLAS runs on one thread everywhere (the sandbox inherits the setting; the PyTorch peer sets
torch.set_num_threads(1)), so every side does the same arithmetic on the same core count.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")         # before NumPy loads its BLAS

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import orjson  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from glassllm.apps.client import Sandbox  # noqa: E402
from glassllm.sandbox.runtime import tune_malloc  # noqa: E402
from glassllm.sandbox.wire import coerce, encode_base64  # noqa: E402
from tests.sandbox_server import free_port, running_sandbox, wait_healthy  # noqa: E402


def median_time(fn, n: int) -> float:
    fn()
    fn()                                            # warm up: connections, caches
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def enc(x: np.ndarray) -> dict:
    return {"dtype": "float64", "shape": list(x.shape),
            "base64": base64.b64encode(np.ascontiguousarray(x, dtype="<f8").tobytes()).decode()}


def dec(x: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(x["base64"]), dtype="<f8").reshape(x["shape"]).copy()


def floor(a_wire: dict, b_wire: dict) -> None:
    """The in-process floor: decode, forward, backward (seed ones), encode — with the same
    base64 codec (glassllm.sandbox.wire: pybase64 when installed) and JSON writer (orjson) as the
    sandbox. (Until 2026-11-30 it wrote the answer with the standard library's json.dumps,
    ~7 ms of escaping a 2 MB string that no server needs: the floor was 3x too high.)"""
    a, b = coerce("tensor", "a", a_wire), coerce("tensor", "b", b_wire)
    out = a @ b
    g = np.ones_like(out)
    orjson.dumps({"value": encode_base64(out),
                  "grads": {"a": encode_base64(g @ b.T), "b": encode_base64(a.T @ g)}})


@contextlib.contextmanager
def torch_peer(python: str):
    port = free_port()
    proc = subprocess.Popen([python, str(ROOT / "bench" / "torch_peer.py"), "--port", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=60)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", default="/tmp/torchvenv/bin/python")
    parser.add_argument("-n", type=int, default=40)
    args = parser.parse_args()
    tune_malloc()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    small = rng.standard_normal((4, 8))
    n = args.n

    t_floor = median_time(lambda: floor(encode_base64(a), encode_base64(b)), n)
    with running_sandbox(env={"GLASSLLM_MAX_CONCURRENCY": "4"}) as url, Sandbox(url) as sb:
        t_client = median_time(lambda: sb.op("matmul", {"a": a, "b": b}), n)
        check = sb.op("matmul", {"a": a, "b": b})
        assert check.value.tobytes() == (a @ b).tobytes()

        body = json.dumps({"inputs": {"a": small.tolist()}})
        with httpx.Client(base_url=url) as raw:
            def raw_call():
                r = raw.post("/api/v1/ops/softmax", content=body,
                             headers={"content-type": "application/json"}).json()
                return np.array(r["value"]), {k: np.array(v) for k, v in r["grads"].items()}
            t_raw = median_time(raw_call, n * 5)
        t_small = median_time(lambda: sb.op("softmax", {"a": small}), n * 5)

    print("matmul (256, 256) @ (256, 256), forward + backward, one client, sequential")
    print(f"  in-process floor (b64 decode, NumPy fwd+bwd, b64 encode): {t_floor * 1e3:7.2f} ms")
    print(f"  glassllm.client, base64 arrays:                           {t_client * 1e3:7.2f} ms"
          f"  ({t_client / t_floor:.2f}x the floor; target <= 1.2x)")
    if Path(args.torch_python).exists():
        with torch_peer(args.torch_python) as peer, httpx.Client(base_url=peer) as h:
            jbody = json.dumps({"a": a.tolist(), "b": b.tolist()})
            bbody = json.dumps({"a": enc(a), "b": enc(b)})
            hdr = {"content-type": "application/json"}

            def torch_json():
                r = h.post("/json", content=jbody, headers=hdr).json()
                return np.array(r["value"]), np.array(r["grads"]["a"]), np.array(r["grads"]["b"])

            def torch_b64():
                r = h.post("/base64", content=bbody, headers=hdr).json()
                return dec(r["value"]), dec(r["grads"]["a"]), dec(r["grads"]["b"])
            t_tj = median_time(torch_json, max(n // 4, 5))
            t_tb = median_time(torch_b64, n)
        print(f"  PyTorch + FastAPI, JSON lists:                            {t_tj * 1e3:7.2f} ms"
              f"  (client: {t_tj / t_client:.1f}x its requests/s; target >= 10x)")
        print(f"  PyTorch + FastAPI, base64 arrays:                         {t_tb * 1e3:7.2f} ms"
              f"  (client: {t_client / t_tb:.2f}x its time; target <= 1.3x)")
    else:
        print(f"  (PyTorch peers skipped: {args.torch_python} not found)")
    print("softmax (4, 8), forward + backward")
    print(f"  raw httpx (json.dumps, post, .json(), np.array):          {t_raw * 1e3:7.3f} ms")
    print(f"  glassllm.client:                                          {t_small * 1e3:7.3f} ms"
          f"  ({t_small / t_raw:.2f}x raw httpx; target <= 1.1x)")


if __name__ == "__main__":
    main()
