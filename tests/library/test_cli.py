"""The CLI's input checks: bad options exit 2 with an argparse-style
message naming the option and its rule, never a traceback; a diverging run saves nothing."""

import json

import numpy as np
import pytest

import glassllm.apps.cli as cli
from glassllm.apps.cli import main
from glassllm.layers import GlassConfig, GlassLM
from glassllm.training.loop import TrainingDiverged, train

TINY = ["--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--n-kv-heads", "1"]
TINY += ["--ffn-hidden", "16", "--max-seq-len", "16", "--batch-size", "2"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("hello glassy world. " * 20, encoding="utf-8")
    return path


def usage_error(capsys, argv) -> str:
    """Run the CLI expecting argparse's exit 2; return the last stderr line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


# --- train ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--steps", "0", "must be a positive integer"),
        ("--steps", "-3", "must be a positive integer"),
        ("--steps", "1.5", "must be a positive integer"),
        ("--batch-size", "0", "must be a positive integer"),
        ("--lr", "nan", "must be a finite number > 0"),
        ("--lr", "inf", "must be a finite number > 0"),
        ("--lr", "-0.001", "must be a finite number > 0"),
        ("--lr", "0", "must be a finite number > 0"),
        ("--weight-decay", "-0.1", "must be a finite number ≥ 0"),
        ("--weight-decay", "nan", "must be a finite number ≥ 0"),
        ("--max-grad-norm", "0", "must be a finite number > 0"),
        ("--max-grad-norm", "inf", "must be a finite number > 0"),
        ("--seed", "-1", "must be a non-negative integer"),
        ("--vocab", "100", "must be 256 (the byte-level tokenizer)"),
        ("--d-model", "0", "must be a positive integer"),
        ("--n-layers", "0", "must be a positive integer"),
        ("--n-heads", "-2", "must be a positive integer"),
        ("--n-kv-heads", "0", "must be a positive integer"),
        ("--ffn-hidden", "0", "must be a positive integer"),
        ("--max-seq-len", "0", "must be a positive integer"),
        ("--rope-theta", "inf", "must be a finite number > 0"),
        ("--norm-eps", "nan", "must be a finite number > 0"),
    ],
)
def test_train_refuses_bad_numbers_naming_option_and_rule(
    capsys, tmp_path, corpus, option, value, rule
):
    out = tmp_path / "m.npz"
    argv = ["train", str(corpus), "--out", str(out), *TINY, option, value]
    line = usage_error(capsys, argv)
    assert line == f"glassllm train: error: argument {option}: {rule}, got {value!r}"
    assert not out.exists()


def test_every_config_field_has_a_rule():
    # A field added to GlassConfig must get a checked --option, not a bare type().
    assert {f for f in GlassConfig.__dataclass_fields__} == set(cli._CONFIG_OPTIONS)


def test_train_help_states_the_rules(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--steps STEPS ≥ 1 (default 300)" in text
    assert "--lr LR finite, > 0 (default 0.003)" in text


def test_train_refuses_clashing_heads_and_bad_files(capsys, tmp_path, corpus):
    out = str(tmp_path / "m.npz")
    line = usage_error(capsys, ["train", str(corpus), "--out", out, *TINY, "--n-heads", "3"])
    assert line == (
        "glassllm train: error: arguments --d-model 16, --n-heads 3, --n-kv-heads 1 do not "
        "fit: d_model 16 is not divisible by n_heads 3"
    )
    missing = tmp_path / "nope.txt"
    line = usage_error(capsys, ["train", str(missing), "--out", out])
    assert line == f"glassllm train: error: argument TEXT_FILE: text file {missing} not found"
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe" * 100)
    line = usage_error(capsys, ["train", str(binary), "--out", out])
    assert line.startswith(f"glassllm train: error: argument TEXT_FILE: {binary} is not UTF-8")
    nodir = tmp_path / "no" / "m.npz"
    line = usage_error(capsys, ["train", str(corpus), "--out", str(nodir)])
    assert line == f"glassllm train: error: argument --out: directory {nodir.parent} does not exist"
    line = usage_error(capsys, ["train", str(corpus), "--out", str(tmp_path / "m.json")])
    assert "argument --out: " in line and "a checkpoint is an .npz archive" in line


def test_train_stops_on_a_nonfinite_loss_and_saves_nothing(capsys, tmp_path, corpus):
    # lr 1e300 is finite (accepted) but blows the weights up: the run must stop, exit 1,
    # say why, and leave no checkpoint behind (it used to save a nan model).
    out = tmp_path / "m.npz"
    argv = ["train", str(corpus), "--steps", "5", "--lr", "1e300", "--out", str(out), *TINY]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "error: training diverged: the gradient norm is nan at step 2 of 5" in err
    assert "no checkpoint saved" in err and "Traceback" not in err
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_train_function_raises_training_diverged_on_nan_lr():
    config = GlassConfig(
        d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=8, max_seq_len=8
    )
    data = np.arange(64) % 256
    with np.errstate(all="ignore"), pytest.raises(TrainingDiverged, match="at step 2 of 3"):
        train(GlassLM(config), data, steps=3, batch_size=2, lr=1e300)
    # A nan lr is refused before any step, as torch.optim does.
    with pytest.raises(ValueError, match=r"lr must be a finite number >= 0\.0, got nan"):
        train(GlassLM(config), data, steps=3, batch_size=2, lr=float("nan"))


# --- generate ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "m.npz"
    config = GlassConfig(
        d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=16, max_seq_len=16
    )
    GlassLM(config).save_checkpoint(path)
    return path


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--top-k", "0", "must be a positive integer"),
        ("--top-k", "-3", "must be a positive integer"),
        ("--temperature", "-1", "must be 0 (greedy) or a finite number ≥ 0.001"),
        ("--temperature", "nan", "must be 0 (greedy) or a finite number ≥ 0.001"),
        ("--temperature", "inf", "must be 0 (greedy) or a finite number ≥ 0.001"),
        ("--temperature", "1e-310", "must be 0 (greedy) or a finite number ≥ 0.001"),
        ("--max-new-tokens", "-1", "must be an integer from 0 to 10000"),
        ("--max-new-tokens", "10001", "must be an integer from 0 to 10000"),
        ("--seed", "-2", "must be a non-negative integer"),
    ],
)
def test_generate_refuses_bad_numbers_naming_option_and_rule(
    capsys, checkpoint, option, value, rule
):
    line = usage_error(capsys, ["generate", "--checkpoint", str(checkpoint), option, value])
    assert line == f"glassllm generate: error: argument {option}: {rule}, got {value!r}"


def test_generate_refuses_an_empty_prompt(capsys, checkpoint):
    line = usage_error(capsys, ["generate", "--checkpoint", str(checkpoint), "--prompt="])
    assert line == "glassllm generate: error: argument --prompt: must not be empty"


def test_generate_documented_edges_work(capsys, checkpoint):
    base = ["generate", "--checkpoint", str(checkpoint), "--prompt", "ab"]
    assert main([*base, "--max-new-tokens", "0"]) == 0
    assert capsys.readouterr().out == "ab\n"  # 0 new tokens echoes the prompt
    assert main([*base, "--max-new-tokens", "8", "--temperature", "0"]) == 0
    greedy = capsys.readouterr().out
    assert main([*base, "--max-new-tokens", "8", "--top-k", "1", "--seed", "5"]) == 0
    assert capsys.readouterr().out == greedy  # top-k 1 is greedy too
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "0 means greedy (argmax)" in text and "omit it for no top-k (the default)" in text


# --- checkpoint -------------------------------------------------------------------------


def copy_checkpoint(checkpoint, tmp_path, name, config_text=None):
    """A copy of ``checkpoint`` as tmp_path/name.npz; its .json replaced by config_text."""
    npz = tmp_path / f"{name}.npz"
    npz.write_bytes(checkpoint.read_bytes())
    text = checkpoint.with_suffix(".json").read_text() if config_text is None else config_text
    npz.with_suffix(".json").write_text(text, encoding="utf-8")
    return npz


def test_generate_names_the_missing_checkpoint_not_its_json(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = usage_error(capsys, ["generate", "--checkpoint", "nope.npz"])
    assert line == "glassllm generate: error: argument --checkpoint: checkpoint nope.npz not found"
    (tmp_path / "dir.npz").mkdir()
    line = usage_error(capsys, ["generate", "--checkpoint", "dir.npz"])
    assert line.endswith("checkpoint dir.npz is not a file")


def test_generate_names_a_missing_or_corrupt_config(capsys, tmp_path, checkpoint):
    npz = copy_checkpoint(checkpoint, tmp_path, "lonely")
    npz.with_suffix(".json").unlink()
    line = usage_error(capsys, ["generate", "--checkpoint", str(npz)])
    assert line == (
        f"glassllm generate: error: argument --checkpoint: checkpoint {npz}: its config "
        f"{npz.with_suffix('.json')} is missing (`glassllm train` writes both)"
    )
    cases = {
        "{broken": "Expecting property name",
        "[1, 2]": "expected a JSON object, got list",
        '{"wat": 1}': "unknown field(s) ['wat']",
        '{"d_model": -4}': "d_model must be a positive integer, got '-4'",
        '{"vocab": 300}': "vocab must be 256 (the byte-level tokenizer), got '300'",
        '{"d_model": 16, "n_heads": 3}': "d_model 16 is not divisible by n_heads 3",
    }
    for i, (text, reason) in enumerate(cases.items()):
        npz = copy_checkpoint(checkpoint, tmp_path, f"bad{i}", text)
        line = usage_error(capsys, ["generate", "--checkpoint", str(npz)])
        assert line.startswith(
            f"glassllm generate: error: argument --checkpoint: checkpoint {npz}: its config "
            f"{npz.with_suffix('.json')} is corrupt: "
        )
        assert reason in line


def test_generate_names_a_corrupt_or_diverged_npz(capsys, tmp_path, checkpoint):
    npz = copy_checkpoint(checkpoint, tmp_path, "junk")
    npz.write_bytes(b"not a zip")
    line = usage_error(capsys, ["generate", "--checkpoint", str(npz)])
    assert line.endswith(
        f"checkpoint {npz} is not an .npz archive (empty, truncated or another format)"
    )
    config = json.loads(checkpoint.with_suffix(".json").read_text())
    npz = copy_checkpoint(checkpoint, tmp_path, "other", json.dumps({**config, "d_model": 32}))
    line = usage_error(capsys, ["generate", "--checkpoint", str(npz)])
    assert f"checkpoint {npz} is corrupt or does not match its config" in line
    assert "tok_emb.weight: expected shape (256, 32), got (256, 16)" in line
    npz = copy_checkpoint(checkpoint, tmp_path, "nan")
    with np.load(checkpoint) as archive:
        arrays = {name: archive[name].copy() for name in archive.files}
    arrays["head.weight"][0, 0] = np.nan
    np.savez(npz, **arrays)
    line = usage_error(capsys, ["generate", "--checkpoint", str(npz)])
    assert line.endswith(
        f"checkpoint {npz} has non-finite weights (head.weight); it was saved from a "
        "diverged run, train it again"
    )
