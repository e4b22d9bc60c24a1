"""GlassLM, Module, optimizers, tokenizer, training and the CLI (SPEC L7)."""

import doctest
import json
import math
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import glassllm.optim as optim_module
import glassllm.tokenizer as tokenizer_module
from glassllm import Tensor
from glassllm.apps.cli import TQDM_MISSING, main
from glassllm.layers import Block, GlassConfig, GlassLM, rope_angles, transformer_block
from glassllm.optim import SGD, AdamW, clip_grad_norm
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import default_corpus, get_batch, train

SMALL = GlassConfig(
    d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24, max_seq_len=16, seed=3
)


# --- config and modules -----------------------------------------------------------------


def test_config_is_frozen_and_validates_heads():
    config = GlassConfig()
    with pytest.raises(AttributeError):
        config.d_model = 8  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"64.*5"):
        GlassConfig(n_heads=5)
    with pytest.raises(ValueError, match=r"4.*3"):
        GlassConfig(n_kv_heads=3)
    with pytest.raises(ValueError, match="even"):
        GlassConfig(d_model=12, n_heads=4, n_kv_heads=2)  # dk = 3
    assert GlassConfig.from_json(config.to_json()) == config


def test_named_parameters_dotted_names_and_shapes():
    model = GlassLM(SMALL)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    assert list(shapes)[:2] == ["tok_emb.weight", "blocks.0.attn_norm.weight"]
    assert shapes["blocks.0.attn.wq"] == (16, 16)
    assert shapes["blocks.1.attn.wk"] == (16, 8)  # Hkv·dk = 2·4
    assert shapes["blocks.1.attn.wv"] == (16, 8)
    assert shapes["blocks.0.attn.wo"] == (16, 16)
    assert shapes["blocks.0.ffn.w1"] == shapes["blocks.0.ffn.w3"] == (16, 24)
    assert shapes["blocks.0.ffn.w2"] == (24, 16)
    assert shapes["norm.weight"] == (16,) and shapes["head.weight"] == (16, 256)
    assert len(shapes) == 3 + 2 * 9 and len(model.parameters()) == len(shapes)


def test_same_seed_same_weights_other_seed_other_weights():
    a, b = GlassLM(SMALL), GlassLM(SMALL)
    c = GlassLM(GlassConfig(**{**SMALL.__dict__, "seed": 4}))
    for (name, p), (_, q), (_, r) in zip(
        a.named_parameters(), b.named_parameters(), c.named_parameters(), strict=True
    ):
        np.testing.assert_array_equal(p.data, q.data)
        if "norm" not in name:
            assert not np.array_equal(p.data, r.data), name


def test_block_module_equals_transformer_block():
    rng = np.random.default_rng(0)
    block = Block(SMALL, rng)
    x = Tensor(rng.normal(size=(2, 5, 16)))
    cos, sin = rope_angles(5, 4)
    weights = [
        block.attn_norm.weight,
        block.attn.wq,
        block.attn.wk,
        block.attn.wv,
        block.attn.wo,
        block.ffn_norm.weight,
        block.ffn.w1,
        block.ffn.w2,
        block.ffn.w3,
    ]
    expected = transformer_block(x, *weights, 4, 2, cos, sin, eps=SMALL.norm_eps).data
    # bit for bit: Block.forward calls the same layer functions on the same arrays
    np.testing.assert_array_equal(block(x, cos, sin).data, expected)


def test_forward_shape_loss_and_backward_reach_every_parameter():
    model = GlassLM(SMALL)
    ids = np.arange(2 * 7).reshape(2, 7) % 256
    assert model(ids).shape == (2, 7, 256)
    loss = model.loss(ids, (ids + 1) % 256)
    assert loss.shape == ()
    assert abs(loss.item() - math.log(256)) < 1.5  # freshly initialised: near uniform
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert np.all(np.isfinite(p.grad)), name
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_model_loss_gradcheck_every_parameter():
    # End to end: the whole model's backward against finite differences (vocab 16 keeps
    # the embedding and head small enough to perturb every element).
    from glassllm import gradcheck

    config = GlassConfig(
        vocab=16,
        d_model=8,
        n_layers=2,
        n_heads=2,
        n_kv_heads=1,
        ffn_hidden=8,
        max_seq_len=4,
        seed=5,
    )
    model = GlassLM(config)
    names = [name for name, _ in model.named_parameters()]
    params = model.parameters()
    ids = np.array([[1, 5, 9], [15, 0, 3]])
    targets = np.array([[5, 9, 2], [0, 3, 3]])

    def bind(name, tensor):  # model.blocks[0].attn.wq = tensor, from "blocks.0.attn.wq"
        *path, attr = name.split(".")
        obj = model
        for part in path:
            obj = obj[int(part)] if isinstance(obj, list) else getattr(obj, part)
        setattr(obj, attr, tensor)

    def loss(*tensors):
        for name, tensor in zip(names, tensors, strict=True):
            bind(name, tensor)
        return model.loss(ids, targets)

    result = gradcheck(loss, *params, atol=1e-7, rtol=1e-5)
    failed = [n for n, r in zip(names, result.inputs, strict=True) if not r.passed]
    assert result.passed and len(result.inputs) == 3 + 2 * 9, failed


def test_model_is_causal_bit_identical():
    model = GlassLM(SMALL)
    ids = np.array([[72, 101, 108, 108, 111, 32, 119, 111]])
    base = model(ids).data
    for t in range(ids.shape[1] - 1):
        changed = ids.copy()
        changed[0, t + 1] = (changed[0, t + 1] + 1) % 256
        out = model(changed).data
        # bit for bit: the same code on arrays of the same shapes; a future token enters
        # an earlier row only through a probability that is exactly 0
        np.testing.assert_array_equal(out[:, : t + 1], base[:, : t + 1])


def test_forward_rejects_too_long_sequences():
    with pytest.raises(ValueError, match=r"17.*16"):
        GlassLM(SMALL)(np.zeros((1, 17), dtype=int))


def test_save_load_gives_identical_logits(tmp_path):
    model = GlassLM(SMALL)
    for p in model.parameters():  # move away from the seeded initialisation
        p.data = p.data + 0.01 * np.arange(p.data.size).reshape(p.shape) % 0.3
    ids = np.array([[1, 2, 3, 250, 4]])
    path = tmp_path / "model.npz"
    model.save_checkpoint(path)
    assert json.loads(path.with_suffix(".json").read_text())["d_model"] == 16

    other = GlassLM(GlassConfig(**{**SMALL.__dict__, "seed": 99}))
    assert not np.array_equal(other(ids).data, model(ids).data)
    other.load(path)
    np.testing.assert_array_equal(other(ids).data, model(ids).data)
    np.testing.assert_array_equal(GlassLM.from_checkpoint(path)(ids).data, model(ids).data)
    with np.load(path, allow_pickle=False) as archive:  # plain arrays only, no pickle
        assert sorted(archive.files) == sorted(model.state_dict())


def test_load_state_dict_rejects_mismatches():
    model = GlassLM(SMALL)
    state = model.state_dict()
    with pytest.raises(KeyError, match=r"norm\.weight"):
        model.load_state_dict({k: v for k, v in state.items() if k != "norm.weight"})
    with pytest.raises(ValueError, match=r"head\.weight"):
        model.load_state_dict({**state, "head.weight": np.zeros((2, 2))})


def test_generate_is_deterministic_for_a_seed():
    model = GlassLM(SMALL)
    prompt = np.array([84, 104, 101])
    a = model.generate(prompt, 20, temperature=1.0, top_k=5, rng=np.random.default_rng(1))
    b = model.generate(prompt, 20, temperature=1.0, top_k=5, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (23,) and a[:3].tolist() == [84, 104, 101]
    greedy = model.generate(prompt, 3, temperature=0)
    with_context = model(greedy[None, :3]).data[0, -1]
    assert greedy[3] == np.argmax(with_context)


def test_generate_top_k_one_is_greedy():
    model = GlassLM(SMALL)
    prompt = np.array([65, 66])
    sampled = model.generate(prompt, 25, temperature=1.5, top_k=1, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(sampled, model.generate(prompt, 25, temperature=0))


# --- optimizers (hand-computed numbers) -----------------------------------------------


def test_sgd_momentum_hand_computed():
    p = Tensor([1.0, -2.0], requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = np.array([1.0, 2.0])
    opt.step()  # buf = g = [1, 2]; p = [1, -2] - 0.1·[1, 2]
    np.testing.assert_allclose(p.data, [0.9, -2.2], rtol=0, atol=1e-15)
    p.grad = np.array([-1.0, 0.5])
    opt.step()  # buf = 0.9·[1, 2] + [-1, 0.5] = [-0.1, 2.3]
    np.testing.assert_allclose(p.data, [0.91, -2.43], rtol=0, atol=1e-15)
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no grad: untouched
    np.testing.assert_allclose(p.data, [0.91, -2.43], rtol=0, atol=1e-15)


def test_sgd_weight_decay_is_coupled():
    p = Tensor([2.0], requires_grad=True)
    opt = SGD([p], lr=0.5, weight_decay=0.1)
    p.grad = np.array([1.0])
    opt.step()  # g + wd·p = 1.2; p = 2 - 0.5·1.2
    assert p.data.tolist() == pytest.approx([1.4], abs=1e-15)


def test_adamw_hand_computed_two_steps():
    p = Tensor([1.0], requires_grad=True)
    opt = AdamW([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    p.grad = np.array([0.5])
    opt.step()
    # decay: 1·(1 - 0.1·0.1) = 0.99; m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25
    assert p.data[0] == pytest.approx(0.99 - 0.1 * 0.5 / (0.5 + 1e-8), abs=1e-14)
    p.grad = np.array([-1.0])
    opt.step()
    m = 0.9 * 0.05 + 0.1 * -1.0  # -0.055
    v = 0.999 * 0.00025 + 0.001 * 1.0  # 0.00124975
    m_hat, v_hat = m / (1 - 0.9**2), v / (1 - 0.999**2)
    expected = 0.89 * 0.99 - 0.1 * m_hat / (math.sqrt(v_hat) + 1e-8)
    assert p.data[0] == pytest.approx(expected, abs=1e-8)
    assert p.data[0] == pytest.approx(0.917710, abs=1e-6)


def test_adamw_decay_is_decoupled_from_the_gradient():
    # With a zero gradient Adam's step is 0, so only the decoupled decay moves p.
    p = Tensor([3.0], requires_grad=True)
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = np.array([0.0])
    opt.step()
    assert p.data[0] == pytest.approx(3.0 * (1 - 0.05), abs=1e-15)


def test_clip_grad_norm_hand_computed():
    a, b = Tensor([0.0, 0.0], requires_grad=True), Tensor([0.0], requires_grad=True)
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])
    assert clip_grad_norm([a, b], 10.0) == 5.0
    assert a.grad.tolist() == [3.0, 0.0]  # under the limit: untouched
    assert clip_grad_norm([a, b], 1.0) == 5.0
    np.testing.assert_allclose(np.concatenate([a.grad, b.grad]), [0.6, 0.0, 0.8], atol=1e-6)


def test_optimizer_rejects_empty_parameters():
    with pytest.raises(ValueError, match="empty"):
        AdamW([])


@pytest.mark.parametrize("module", [optim_module, tokenizer_module])
def test_docstring_examples_run(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# --- tokenizer --------------------------------------------------------------------------


@given(st.text())
def test_tokenizer_round_trip_exact(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.size == len(text.encode("utf-8"))
    assert ids.size == 0 or (ids.min() >= 0 and ids.max() < 256)
    assert tok.decode(ids, errors="strict") == text


def test_tokenizer_values_and_invalid_utf8():
    tok = ByteTokenizer()
    assert tok.encode("Aé€").tolist() == [65, 195, 169, 226, 130, 172]
    assert tok.decode([65, 255]) == "A\ufffd"  # a sampled invalid byte becomes U+FFFD
    with pytest.raises(UnicodeDecodeError):
        tok.decode([255], errors="strict")
    with pytest.raises(ValueError, match="256"):
        tok.decode([256])


# --- training ---------------------------------------------------------------------------


def test_get_batch_targets_are_inputs_shifted():
    data = np.arange(100)
    ids, targets = get_batch(data, 4, 10, np.random.default_rng(0))
    assert ids.shape == targets.shape == (4, 10)
    np.testing.assert_array_equal(targets, ids + 1)


def test_default_corpus_is_shipped():
    text = default_corpus()
    assert len(text.encode("utf-8")) > 5000 and "miller" in text


def test_training_default_config_drops_loss_well_below_ln256():
    # the default tiny config on the default corpus. Measured: 6.15 at step 1,
    # about 1.2 averaged over steps 281-300, in ~8 s on 2 cores.
    data = ByteTokenizer().encode(default_corpus())
    result = train(GlassLM(GlassConfig()), data, steps=300, seed=0)
    assert result.losses[0] > 5.5
    assert np.mean(result.losses[-20:]) < 2.0 < math.log(256)


def test_training_is_deterministic_for_a_seed():
    data = ByteTokenizer().encode(default_corpus())
    runs = [GlassLM(SMALL) for _ in range(2)]
    losses = [train(m, data, steps=15, batch_size=4, seed=7).losses for m in runs]
    assert losses[0] == losses[1]
    for p, q in zip(runs[0].parameters(), runs[1].parameters(), strict=True):
        np.testing.assert_array_equal(p.data, q.data)
    other = train(GlassLM(SMALL), data, steps=15, batch_size=4, seed=8).losses
    assert other != losses[0]


# --- CLI --------------------------------------------------------------------------------


TINY_FLAGS = [
    "--d-model",
    "16",
    "--n-layers",
    "1",
    "--n-heads",
    "2",
    "--n-kv-heads",
    "1",
    "--ffn-hidden",
    "16",
    "--max-seq-len",
    "16",
    "--batch-size",
    "2",
]


def test_cli_train_then_generate(tmp_path, capsys):
    corpus = tmp_path / "text.txt"
    corpus.write_text("hello glassy world. " * 20, encoding="utf-8")
    out = tmp_path / "ckpt.npz"
    assert main(["train", str(corpus), "--steps", "5", "--out", str(out), *TINY_FLAGS]) == 0
    assert out.exists() and out.with_suffix(".json").exists()
    assert "trained 5 steps" in capsys.readouterr().out
    assert json.loads(out.with_suffix(".json").read_text())["n_kv_heads"] == 1

    args = [
        "generate",
        "--checkpoint",
        str(out),
        "--prompt",
        "hel",
        "--max-new-tokens",
        "12",
        "--temperature",
        "0.9",
        "--top-k",
        "10",
        "--seed",
        "3",
    ]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first  # same seed, same text
    assert first.startswith("hel")


def test_cli_train_default_corpus_without_tqdm(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm → ImportError
    out = tmp_path / "m.npz"
    assert main(["train", "--steps", "2", "--out", str(out), *TINY_FLAGS]) == 0
    err = capsys.readouterr().err
    assert TQDM_MISSING in err and "step 2/2" in err


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:  # bad input: argparse's exit 2
        main(["generate", "--checkpoint", str(tmp_path / "missing.npz")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(f"checkpoint {tmp_path / 'missing.npz'} not found\n")
    short = tmp_path / "short.txt"
    short.write_text("too short", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:  # bad input: argparse's exit 2
        main(["train", str(short), "--steps", "1", "--out", str(tmp_path / "x.npz")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith(
        "glassllm train: error: argument TEXT_FILE: the text has 9 bytes; training windows "
        "need at least --max-seq-len + 1 = 65\n"
    )
    with pytest.raises(SystemExit):
        main(["train", "--steps", "not-a-number"])


@pytest.mark.parametrize("name", ["layers", "modules", "optim", "tokenizer", "training.loop",
                                  "apps.cli"])
def test_module_all_is_complete(name):
    # The order is ruff's (RUF022, isort-style); here: every public name, each once.
    import importlib

    module = importlib.import_module(f"glassllm.{name}")
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    public |= set(getattr(module, "_MODULES", ()))  # layers also gives the module classes
    if name == "layers":                              # and the contracts of glassllm.shapes
        public |= {"attention_shape", "linear_shape", "rms_norm_shape", "swiglu_shape",
                   "transformer_block_shape"}
    assert len(set(module.__all__)) == len(module.__all__)
    assert set(module.__all__) == public


def test_the_modules_are_one_set_of_classes_from_either_import_path():
    """L7: the module classes live in glassllm.modules and stay importable from
    glassllm.layers (the same objects); importing glassllm.modules first works too."""
    import subprocess
    import sys

    from glassllm import layers, modules

    for name in modules.__all__:
        assert getattr(layers, name) is getattr(modules, name)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        layers.Nope  # noqa: B018
    assert set(modules.__all__) <= set(layers.__all__) and set(modules.__all__) <= set(dir(layers))
    star: dict = {}
    exec("from glassllm.layers import *", star)  # the star import gives them too
    assert star["GlassLM"] is modules.GlassLM
    out = subprocess.run([sys.executable, "-c", "import glassllm.modules as m; "
                          "from glassllm.layers import GlassLM; print(GlassLM is m.GlassLM)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
