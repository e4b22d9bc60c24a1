"""The sandbox works under any path prefix (a JupyterHub proxy tile serves it at
/user/<name>/glassllm/, stripping the prefix): every page it writes names its addresses
relative to where it was served, and OpenAPI's server is "." (relative to the document)
so Swagger UI's "Try it out" calls the sandbox there. The browser half, through a real
jupyter-server-proxy, is tests/notebooks/test_jupyter_tile.py."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app

# an address from the host's root, in an attribute or in Swagger UI's start script
ABSOLUTE = re.compile(r"""(?:\b(?:href|src|action)=["']|\b(?:url|Url)["']?\s*:\s*["'])/(?!/)""")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


@pytest.mark.parametrize("path", ["/", "/docs", "/docs/contract/", "/docs/contract/http",
                                  "/docs/contract/library", "/docs/contract/page"])
def test_no_page_names_an_address_from_the_hosts_root(client, path):
    res = client.get(path)
    assert res.status_code == 200
    assert ABSOLUTE.findall(res.text) == [], path


def test_the_contracts_root_redirects_relatively(client):
    res = client.get("/docs/contract", follow_redirects=False)
    assert res.status_code in (302, 307)
    assert res.headers["location"] == "contract/"


def test_openapi_names_its_server_relative_to_the_document(client):
    assert client.get("/openapi.json").json()["servers"] == [{"url": "."}]
