"""/openapi.json generates complete clients with the two most used generators,
default settings, offline (docs/openapi-clients.md).

The generators are installed by the test setup (`tools/client_generators.py install`, run
by ``make test`` and by the fixture below when missing); each run here is offline. The
Python client is then called against a real sandbox: values, NaN and errors round-trip.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_server import ROOT, running_sandbox

from glassllm.sandbox.registry import OPS
from glassllm_service.app import create_app

sys.path.insert(0, str(ROOT / "tools"))
import client_generators as G

pytestmark = pytest.mark.slow
PACKAGE = "glassllm_gradient_sandbox_client"


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> tuple[Path, dict]:
    doc = create_app().openapi()
    path = tmp_path_factory.mktemp("openapi") / "openapi.json"
    path.write_text(json.dumps(doc))
    return path, doc


def operations(doc: dict) -> list[tuple[str, str, str]]:
    """(method, path, operationId) of every operation of the document."""
    return [(method, path, op["operationId"]) for path, item in doc["paths"].items()
            for method, op in item.items() if isinstance(op, dict) and "responses" in op]


@pytest.fixture(scope="module")
def python_client(document) -> Path:
    G.install()                                     # a no-op once make test installed it
    path, _ = document
    out = path.parent / "python"
    result = G.generate_python(path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "will not be generated" not in result.stdout + result.stderr, result.stdout
    return out


def test_the_document_routes_are_the_ones_the_api_serves(document):
    _, doc = document
    found = {(m, p) for m, p, _ in operations(doc)}
    for route in ("/api/v1/ops/softmax", "/api/v1/eval", "/api/v1/train",
                  "/api/v1/model/attention"):
        assert ("post", route) in found
    assert ("get", "/healthz") in found and ("get", "/api/v1/ops/{name}") in found


def test_the_python_client_has_every_endpoint(document, python_client):
    _, doc = document
    generated = set()
    for file in (python_client / PACKAGE / "api").rglob("*.py"):
        text = file.read_text()
        for method, url in re.findall(r'"method": "(\w+)",\s*"url": "([^"]+)"', text):
            generated.add((method, url))
    wanted = {(m, p) for m, p, _ in operations(doc)}
    assert wanted - generated == set(), f"missing from the Python client: {wanted - generated}"
    assert len(wanted) >= len(OPS) + 6          # every op, eval, examples, train, health …


def test_the_typescript_types_have_every_endpoint(document, tmp_path):
    G.install()
    if not G.typescript_generator_ready():
        pytest.skip("npm is not on PATH: openapi-typescript could not be installed")
    path, doc = document
    out = tmp_path / "schema.d.ts"
    result = G.generate_typescript(path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text()
    missing = []
    for method, route, op_id in operations(doc):
        block = re.search(rf'\n    "{re.escape(route)}": {{\n(.*?)\n    }};', text, re.DOTALL)
        listed = block is not None and f'{method}: operations["{op_id}"];' in block.group(1)
        if not (listed and re.search(rf"\n    {re.escape(op_id)}: {{\n", text)):
            missing.append((method, route))
    assert missing == [], f"missing from the TypeScript types: {missing}"
    for name in ("NonFinite", "FloatList2D", "Base64Array", "RunSoftmaxRequest", "EvalRequest",
                 "ErrorBody"):
        assert re.search(rf"\n        {name}: ", text), name
    assert '"NaN" | "Infinity" | "-Infinity"' in text


LIVE = '''
import base64, json, struct, sys
sys.path.insert(0, sys.argv[1])
from glassllm_gradient_sandbox_client import Client
from glassllm_gradient_sandbox_client.api.ops import run_softmax
from glassllm_gradient_sandbox_client.api.expressions import eval_expression
from glassllm_gradient_sandbox_client.models import (
    RunSoftmaxRequest, RunSoftmaxRequestInputs, EvalRequest, EvalRequestVariables, NonFinite,
    ErrorBody, OpResult, EvalResult, Base64Array, Base64ArrayDtype, Encoding)

client = Client(base_url=sys.argv[2], raise_on_unexpected_status=True)
out = {}
body = RunSoftmaxRequest(inputs=RunSoftmaxRequestInputs(a=[1.0, NonFinite.NAN, 0.0]))
r = run_softmax.sync_detailed(client=client, body=body)
assert isinstance(r.parsed, OpResult), r
out["softmax"] = {"status": r.status_code.value, "value": r.parsed.value,
                  "grads": r.parsed.grads.to_dict(), "sent": body.to_dict()}
# the binary form: float64 little-endian bytes in, and asked for out
raw = base64.b64encode(struct.pack("<3d", 1.0, float("nan"), 0.0)).decode()
body = RunSoftmaxRequest(
    inputs=RunSoftmaxRequestInputs(a=Base64Array(dtype=Base64ArrayDtype.FLOAT64, shape=[3],
                                                 base64=raw)),
    encoding=Encoding.BASE64)
r = run_softmax.sync_detailed(client=client, body=body)
assert isinstance(r.parsed, OpResult), r
value = r.parsed.value
floats = struct.unpack("<3d", base64.b64decode(value["base64"]))
out["base64"] = {"status": r.status_code.value, "dtype": value["dtype"],
                 "shape": value["shape"], "value": [repr(v) for v in floats]}
variables = EvalRequestVariables.from_dict({"x": [1.0, 2.0], "y": [3.0, 4.0]})
r = eval_expression.sync_detailed(
    client=client, body=EvalRequest(expression="(x * y).sum()", variables=variables))
assert isinstance(r.parsed, EvalResult), r
out["eval"] = {"status": r.status_code.value, "value": r.parsed.value,
               "grads": r.parsed.grads.to_dict()}
r = eval_expression.sync_detailed(
    client=client, body=EvalRequest(expression="softmax(masked_fill(s, msk, -inf))",
                                    variables=EvalRequestVariables.from_dict({"s": [1.0]})))
assert isinstance(r.parsed, ErrorBody), r
out["error"] = {"status": r.status_code.value, **r.parsed.error.to_dict()}
print(json.dumps(out))
'''


def test_the_generated_python_client_round_trips_values_nan_and_errors(python_client,
                                                                       tmp_path):
    script = tmp_path / "live.py"
    script.write_text(LIVE)
    with running_sandbox() as url:
        result = subprocess.run([str(G.OPC_PYTHON), str(script), str(python_client), url],
                                capture_output=True, text=True, timeout=120,
                                env=G.offline_env())
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    # softmax([1, NaN, 0]): NaN spreads to every position (L1.2); sent as the enum's "NaN"
    assert out["softmax"]["sent"] == {"inputs": {"a": [1.0, "NaN", 0.0]}}
    assert out["softmax"]["status"] == 200
    assert out["softmax"]["value"] == ["NaN", "NaN", "NaN"]
    assert out["softmax"]["grads"] == {"a": ["NaN", "NaN", "NaN"]}
    assert out["base64"] == {"status": 200, "dtype": "float64", "shape": [3],
                             "value": ["nan", "nan", "nan"]}
    # sum(x * y) = 1*3 + 2*4 = 11; d/dx = y, d/dy = x
    assert out["eval"] == {"status": 200, "value": 11.0,
                           "grads": {"x": [3.0, 4.0], "y": [1.0, 2.0]}}
    err = out["error"]
    assert err["status"] == 422 and err["code"] == "invalid_expression"
    assert err["message"].startswith("undefined name 'msk'; the variables are: s")
    assert err["position"] == 23 and err["span"] == [23, 26]
