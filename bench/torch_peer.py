"""The endpoints a user would otherwise write: PyTorch behind
FastAPI, a (256, 256) @ (256, 256) matmul forward and backward in float64.

    /tmp/torchvenv/bin/python bench/torch_peer.py --port 8100

POST /json    {"a": lists, "b": lists} -> {"value": lists, "grads": {"a": lists, "b": lists}}
POST /base64  the same with {"dtype", "shape", "base64"} arrays both ways

Runs in its own venv (torch, fastapi, uvicorn, numpy); nothing of glassllm is imported.
"""

from __future__ import annotations

import argparse
import base64

import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, Request

app = FastAPI()


def run(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ta = torch.from_numpy(a).requires_grad_(True)
    tb = torch.from_numpy(b).requires_grad_(True)
    out = ta @ tb
    out.backward(torch.ones_like(out))
    return out.detach().numpy(), ta.grad.numpy(), tb.grad.numpy()


@app.post("/json")
async def json_endpoint(request: Request) -> dict:
    body = await request.json()
    a, b = np.array(body["a"], dtype=np.float64), np.array(body["b"], dtype=np.float64)
    value, ga, gb = run(a, b)
    return {"value": value.tolist(), "grads": {"a": ga.tolist(), "b": gb.tolist()}}


def dec(x: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(x["base64"]), dtype="<f8").reshape(x["shape"]).copy()


def enc(x: np.ndarray) -> dict:
    return {"dtype": "float64", "shape": list(x.shape),
            "base64": base64.b64encode(np.ascontiguousarray(x, dtype="<f8").tobytes()).decode()}


@app.post("/base64")
async def base64_endpoint(request: Request) -> dict:
    body = await request.json()
    value, ga, gb = run(dec(body["a"]), dec(body["b"]))
    return {"value": enc(value), "grads": {"a": enc(ga), "b": enc(gb)}}


@app.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
