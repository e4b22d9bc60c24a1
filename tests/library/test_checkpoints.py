"""Checkpoint files: a config's name comes whole from the name given, and every save is
atomic, so a save that fails halfway leaves the previous checkpoint loadable.

A hyper-parameter sweep names its runs `runs/lr0.003` and `runs/lr0.01`: a config named by
replacing the "suffix" made both `runs/lr0.json`, and the first run no longer loaded. A
save that hit a full disk or a file-size limit left a truncated archive where the previous
one was. The fault here is a real one: RLIMIT_FSIZE in a child process (writes past it
fail with EFBIG, as on a full disk), not a mock.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from sandbox_server import ROOT

from glassllm.apps.cli import main as cli_main
from glassllm.layers import GlassConfig, GlassLM

SMALL = dict(d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=8, max_seq_len=8)
IDS = np.array([[72, 105, 33, 10]])


def test_configs_of_names_that_share_a_stem_do_not_collide(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    models = {name: GlassLM(GlassConfig(seed=seed, rope_theta=theta, **SMALL))
              for name, seed, theta in [("lr0.003", 1, 100.0), ("lr0.01", 2, 1e4)]}
    for name, model in models.items():
        model.save_checkpoint(runs / name)
    assert sorted(p.name for p in runs.iterdir()) == [
        "lr0.003", "lr0.003.json", "lr0.01", "lr0.01.json"]
    for name, model in models.items():
        back = GlassLM.from_checkpoint(runs / name)
        assert back.config == model.config
        np.testing.assert_array_equal(back(IDS).data, model(IDS).data)  # the same bytes
        # and the CLI reads the same pair
        assert cli_main(["generate", "--checkpoint", str(runs / name), "--prompt", "Hi",
                         "--max-new-tokens", "3", "--temperature", "0"]) == 0
        assert capsys.readouterr().out.startswith("Hi")
    # model.npz keeps its model.json (checkpoints written before still load)
    models["lr0.01"].save_checkpoint(tmp_path / "model.npz")
    assert GlassLM.config_path(tmp_path / "model.npz") == tmp_path / "model.json"
    assert json.loads((tmp_path / "model.json").read_text())["rope_theta"] == 1e4


def test_a_saved_file_has_the_mode_open_would_give_it(tmp_path):
    GlassLM(GlassConfig(**SMALL)).save_checkpoint(tmp_path / "m.npz")
    mask = os.umask(0o022)
    os.umask(mask)
    for name in ("m.npz", "m.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.npz"]  # no leftovers


# The child saves a small checkpoint, lowers its file-size limit below what a bigger
# model needs, tries to save that one over it, and reports what happened.
CHILD = r"""
import json, resource, signal, sys
from pathlib import Path
import numpy as np
from glassllm.layers import GlassConfig, GlassLM

path, how = Path(sys.argv[1]), sys.argv[2]
small = dict(d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=8, max_seq_len=8)
first = GlassLM(GlassConfig(seed=1, **small))
save = (lambda m: m.save_checkpoint(path)) if how == "checkpoint" else (lambda m: m.save(path))
save(first)
size = path.stat().st_size
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of being killed
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, hard))
bigger = GlassLM(GlassConfig(seed=2, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2,
                             ffn_hidden=128, max_seq_len=8))
try:
    save(bigger)
    error = None
except OSError as exc:
    error = exc.errno
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print(json.dumps({"error": error, "size": size}))
"""


@pytest.mark.parametrize("how", ["checkpoint", "weights"])
def test_a_save_that_fails_halfway_leaves_the_previous_file_intact(tmp_path, how):
    path = tmp_path / "run.npz"
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), how], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["error"] == 27  # EFBIG: the bigger archive did not fit under the limit
    assert path.stat().st_size == report["size"]
    first = GlassLM(GlassConfig(seed=1, **SMALL))
    back = GlassLM(GlassConfig(seed=5, **SMALL))
    back.load(path)  # the previous archive, whole
    np.testing.assert_array_equal(back(IDS).data, first(IDS).data)
    if how == "checkpoint":
        assert GlassLM.from_checkpoint(path).config == first.config
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        ["run.json", "run.npz"] if how == "checkpoint" else ["run.npz"])  # no .part left


def test_a_checkpoint_comes_back_with_its_config_and_weights(tmp_path):
    config = GlassConfig(vocab=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1,
                         ffn_hidden=16, max_seq_len=8, rope_theta=500.0, seed=3)
    model = GlassLM(config)
    model.save_checkpoint(tmp_path / "m.npz")
    back = GlassLM.from_checkpoint(tmp_path / "m.npz")
    assert back.config == config
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(back.forward(ids).data, model.forward(ids).data)
