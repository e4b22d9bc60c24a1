"""The module names that moved with the layout keep importing, through the one table of
glassllm/__init__.py (`glassllm.MOVED`): the old name gives the very module object of the
new one, never a second copy, and the public names stay what they were. Each check runs in
a fresh interpreter, so no import of the suite has been made before it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from paths import ROOT

import glassllm


def fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("old, new", sorted(glassllm.MOVED.items()))
def test_an_old_name_is_the_new_module_itself(old, new):
    assert fresh(f"import importlib, {old.split('.')[0]}\n"
                 f"old, new = importlib.import_module({old!r}), importlib.import_module({new!r})\n"
                 "print(old is new, new.__name__)") == f"True {new}"


def test_the_names_user_code_imports_keep_working():
    code = """
import glassllm.client, glassllm.wire, glassllm.train, glassllm.fused, glassllm.kvcache
from glassllm.registry import OPS
from glassllm.expr import evaluate, parse
from glassllm.registry.table import OPS as TABLE
from glassllm.client import Sandbox, SandboxError
from glassllm.train import train
from glassllm.training import train_events, attention_maps
from glassllm.checks import check_int
from glassllm.gradcheck import gradcheck
import glassllm.gradcheck
from glassllm.layers import GlassLM, GlassConfig, rope_angles, ATTENTION_PROBE
import glassllm, glassllm.sandbox.registry, glassllm.sandbox.expr.parser as parser
print(OPS is TABLE is glassllm.sandbox.registry.OPS, callable(parse), callable(glassllm.gradcheck),
      glassllm.client.Sandbox is Sandbox, parser.parse is parse, "softmax" in OPS)
"""
    assert fresh(code) == "True True True True True True"


def test_no_module_is_loaded_twice_under_two_names_as_two_objects():
    code = """
import sys
import glassllm.registry.entry, glassllm.expr.graph, glassllm.sandbox.registry.entry
import glassllm.sandbox.expr.graph, glassllm.wire, glassllm.sandbox.wire
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path and name.startswith("glassllm"):
        files.setdefault(path, set()).add(id(module))
print(max(len(ids) for ids in files.values()))
"""
    assert fresh(code) == "1"


def test_a_name_that_never_existed_is_still_an_import_error():
    assert fresh("""
try:
    import glassllm.registry.nothing_here
except ModuleNotFoundError as exc:
    print(exc.name)
""") == "glassllm.sandbox.registry.nothing_here"
