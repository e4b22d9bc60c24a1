"""Write activation_torch_refs.json: relu, tanh, sqrt, gelu (both approximations) with
PyTorch 2.13 in float64 — values and gradients, including 0, tiny, huge and infinite inputs.

Run in a separate venv (the tests never import torch):
    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 numpy
    /tmp/torchvenv/bin/python tests/reference/make_activation_torch_refs.py
"""

import json
import math
from pathlib import Path

import torch

X = [-math.inf, -1e4, -40.0, -6.0, -3.0, -1.0, -0.5, -1e-8, -0.0, 0.0, 1e-8, 0.5, 1.0, 3.0,
     6.0, 40.0, 1e4, math.inf]
POSITIVE = [0.0, 1e-300, 1e-8, 0.25, 1.0, 2.0, 1e8, 1e300, math.inf]
FNS = {
    "relu": (torch.relu, X),
    "tanh": (torch.tanh, X),
    "sqrt": (torch.sqrt, POSITIVE),
    "gelu": (lambda t: torch.nn.functional.gelu(t, approximate="none"), X),
    "gelu_tanh": (lambda t: torch.nn.functional.gelu(t, approximate="tanh"), X),
}


def enc(v: float) -> float | str:
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def main() -> None:
    cases = []
    for name, (fn, xs) in FNS.items():
        x = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        out = fn(x)
        out.backward(torch.ones_like(out))
        cases.append({"name": name, "x": [enc(v) for v in xs],
                      "value": [enc(v) for v in out.detach().tolist()],
                      "grad": [enc(v) for v in x.grad.tolist()]})
    path = Path(__file__).with_name("activation_torch_refs.json")
    path.write_text(json.dumps({"torch": torch.__version__, "dtype": "float64",
                                "grad_output": "ones", "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
