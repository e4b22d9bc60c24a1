"""The README's Python examples run as written (STYLE: examples are tested files)."""

import re

from paths import ROOT

README = ROOT / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README has no Python example"
    for code in blocks:
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)  # our own file, not user input
        if "weight" in namespace:  # the library tour: L3.2's numbers
            assert namespace["weight"].grad.tolist() == [[0, 0], [2, 2], [1, 1], [0, 0]]


def test_readme_names_the_contract_without_a_relative_link_out_of_the_repo():
    text = README.read_text(encoding="utf-8")
    assert "](../" not in text
    assert "`shared/SPEC.md`" in text
