"""The notebooks in examples/notebooks/ are stored without outputs and run to the end on a
real IPython kernel (nbclient), against a real sandbox; each checks its own numbers with
asserts (micrograd's, a derivation by hand against glassllm's autograd, an exercise's
verdict), so running to the end is the test. tools/make_notebooks.py writes them."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient
from paths import ROOT

pytestmark = pytest.mark.slow

NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_are_there_and_stored_without_outputs():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name


def test_the_generator_writes_what_is_stored(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_notebooks",
                                                  ROOT / "tools" / "make_notebooks.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    monkeypatch.setattr(maker, "OUT", tmp_path)
    maker.main()
    for path in NOTEBOOKS:
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_runs_to_the_end(path, url, monkeypatch):
    monkeypatch.setenv("GLASSLLM_URL", url)            # the kernel inherits it
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    results = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in results if o.output_type == "error"]
    pictures = [o for o in results if "text/html" in o.get("data", {})]
    assert pictures, "each notebook draws its graphs or verdicts"
    if path.stem.startswith("03"):
        last = pictures[-1]["data"]["text/plain"]
        assert last.startswith("not yet:") and "wrong" in last, last
