"""Small contract edges of the sandbox (SPEC H2, H4, H7) found by the QA pass: error
wording, a grad_output with nothing to seed, HEAD probes, the op named on body refusals,
and the README's pointer to the contract."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sandbox_server import ROOT

from service.app import create_app
from service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings(max_body_bytes=1000, max_json_depth=8))) as c:
        yield c


def error(r, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


# --------------------------------------------------------------------------------------
# the README points at the contract in words, not with a link that breaks in a clone
# --------------------------------------------------------------------------------------

def test_readme_names_the_contract_without_a_relative_link_out_of_the_repo():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](../" not in text
    assert "`shared/SPEC.md`" in text
