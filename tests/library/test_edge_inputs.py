"""The library at its edges (docs/hardening.md): tied parameters, small integer id dtypes,
a Tensor's truth value and other protocols, output a terminal cannot encode, boundaries
that convert silently, and the decisions on reductions over empty axes."""

import os
import subprocess
import sys

import numpy as np
import pytest

from glassllm import Tensor
from glassllm.apps.cli import main, printable
from glassllm.autograd import (
    cross_entropy,
    embedding,
    getitem,
    log_softmax,
    mean,
    softmax,
    softmax_np,
    tsum,
)
from glassllm.autograd import max as tmax
from glassllm.errors import check_int, id_array
from glassllm.layers import GlassConfig, GlassLM, rope_angles
from glassllm.optim import AdamW, clip_grad_norm
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import get_batch, train

SMALL = GlassConfig(d_model=16, n_layers=2, n_heads=2, n_kv_heads=1, ffn_hidden=16, max_seq_len=8)
SMALL_IDS = [np.uint8, np.int8, np.int16, np.uint16, np.uint32, np.int32, np.uint64]


# --- item 2: a Tensor reachable twice is one parameter --------------------------------------


def _tied_model():
    model = GlassLM(SMALL)
    model.blocks[1].attn.wq = model.blocks[0].attn.wq  # tied, as head = embed in GPT-2
    model.blocks[1].ffn_norm = model.blocks[0].ffn_norm  # a whole tied module
    return model


def test_tied_parameters_are_listed_once_under_the_first_name():
    model, untied = _tied_model(), GlassLM(SMALL)
    names = [n for n, _ in model.named_parameters()]
    assert "blocks.0.attn.wq" in names and "blocks.1.attn.wq" not in names
    assert "blocks.0.ffn_norm.weight" in names and "blocks.1.ffn_norm.weight" not in names
    assert len(names) == len(untied.parameters()) - 2
    assert len({id(p) for p in model.parameters()}) == len(model.parameters())
    wq, norm = model.blocks[0].attn.wq, model.blocks[0].ffn_norm.weight
    assert model.num_parameters() == untied.num_parameters() - wq.size - norm.size
    assert (
        untied.num_parameters() == sum(p.size for p in untied.parameters()) == 11_344
    )  # 2·4096 + 2·1568 + 16


def test_head_tied_to_the_embedding_module_is_listed_once():
    model = GlassLM(SMALL)
    model.head = model.tok_emb  # the GPT-2 idiom with glassllm's attribute names
    names = [n for n, _ in model.named_parameters()]
    assert names[0] == "tok_emb.weight" and not any(n.startswith("head.") for n in names)
    assert model.num_parameters() == GlassLM(SMALL).num_parameters() - 16 * 256
    assert list(model.state_dict()) == names
    opt = AdamW(model.parameters())
    assert len(opt.params) == len(names)


def test_tied_model_trains_a_tied_weight_once_per_step():
    model = _tied_model()
    ids = np.array([[1, 2, 3, 4]])
    model.loss(ids, ids).backward()
    wq = model.blocks[0].attn.wq
    grad, before = wq.grad.copy(), wq.data.copy()
    opt = AdamW(model.parameters(), lr=0.01, weight_decay=0.0)
    opt.step()
    # One AdamW step of a fresh parameter moves each weight by lr·g/(|g|+eps): twice would be 2·lr.
    expected = before - 0.01 * grad / (np.abs(grad) + 1e-8)
    np.testing.assert_allclose(wq.data, expected, rtol=1e-10, atol=1e-12)
    norm = clip_grad_norm(model.parameters(), 1e9)
    assert norm == pytest.approx(np.sqrt(sum(np.sum(p.grad**2) for p in model.parameters())))


def test_tied_model_saves_and_loads_once(tmp_path):
    model = _tied_model()
    state = model.state_dict()
    assert "blocks.1.attn.wq" not in state and "blocks.0.attn.wq" in state
    model.save_checkpoint(tmp_path / "m.npz")
    again = _tied_model()
    again.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(again.blocks[1].attn.wq.data, model.blocks[0].attn.wq.data)
    assert again.blocks[1].attn.wq is again.blocks[0].attn.wq  # still tied after loading
    with pytest.raises(KeyError, match=r"unexpected \[\]"):  # untied: a name is missing
        GlassLM(SMALL).load(tmp_path / "m.npz")


def test_train_on_a_tied_model_runs():
    model = _tied_model()
    data = ByteTokenizer().encode("tied weights are one parameter. " * 4)
    result = train(model, data, steps=2, batch_size=2, seq_len=8)
    assert len(result.losses) == 2 and np.isfinite(result.losses).all()


# --- item 3: small integer id dtypes, forward and backward --------------------------------


def _ids(dtype, shape=(3, 4), high=256, seed=0):
    info = np.iinfo(dtype)
    values = np.random.default_rng(seed).integers(0, min(high, info.max + 1), size=shape)
    values.reshape(-1)[:2] = [min(high, info.max + 1) - 1, 0]  # the last row and row 0
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", SMALL_IDS, ids=lambda d: np.dtype(d).name)
def test_embedding_and_getitem_accept_every_integer_dtype(dtype):
    weight = Tensor(np.random.default_rng(1).normal(size=(256, 3)), requires_grad=True)
    ids = _ids(dtype)
    g = np.random.default_rng(2).normal(size=(*ids.shape, 3))
    expected = np.zeros((256, 3))
    np.add.at(expected, ids.astype(np.int64), g)
    for op in (embedding, getitem):
        weight.grad = None
        out = op(weight, ids)
        np.testing.assert_array_equal(out.data, weight.data[ids.astype(np.int64)])
        out.backward(g)
        np.testing.assert_allclose(weight.grad, expected, rtol=1e-13, atol=1e-13)
    weight.grad = None
    cols = np.array([0, 2, 2], dtype=dtype)
    getitem(weight, (ids[0, :3], cols)).backward(np.array([1.0, 2.0, 3.0]))
    expected = np.zeros((256, 3))
    np.add.at(expected, (ids[0, :3].astype(np.int64), cols.astype(np.int64)), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(weight.grad, expected)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32], ids=lambda d: np.dtype(d).name)
def test_negative_small_ids_count_from_the_end(dtype):
    weight = Tensor(np.arange(256.0 * 2).reshape(256, 2), requires_grad=True)
    ids = np.array([-1, -128, 5], dtype=dtype)
    out = embedding(weight, ids)
    np.testing.assert_array_equal(out.data, weight.data[[255, 128, 5]])
    out.sum().backward()
    assert weight.grad[255].tolist() == [1.0, 1.0] and weight.grad[128].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", SMALL_IDS, ids=lambda d: np.dtype(d).name)
def test_cross_entropy_and_model_loss_accept_every_integer_dtype(dtype):
    logits = Tensor(np.random.default_rng(3).normal(size=(6, 256)), requires_grad=True)
    targets = _ids(dtype, shape=(6,))
    loss = cross_entropy(logits, targets)
    reference = cross_entropy(Tensor(logits.data), targets.astype(np.int64))
    assert loss.item() == reference.item()  # bit for bit: the ids are widened, then the same code
    loss.backward()
    expected = softmax_np(logits.data)
    np.add.at(expected, (np.arange(6), targets.astype(np.int64)), -1.0)
    np.testing.assert_allclose(logits.grad, expected / 6, rtol=1e-12, atol=1e-15)

    model = GlassLM(SMALL)
    ids, tgt = _ids(dtype, (2, 5), seed=4), _ids(dtype, (2, 5), seed=5)
    loss = model.loss(ids, tgt)
    loss.backward()
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    model.zero_grad()
    wide = model.loss(ids.astype(np.int64), tgt.astype(np.int64))
    wide.backward()
    assert loss.item() == wide.item()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(grads[n], p.grad, err_msg=n)
    top = min(255, np.iinfo(dtype).max)
    out = model.generate(np.array([7, top], dtype=dtype), 3, temperature=0)
    assert out.tolist()[:2] == [7, top] and out.dtype == np.int64


@pytest.mark.parametrize("bad", [np.array([1.0, 2.0]), np.array([True, False]), [0.5]])
def test_float_and_bool_ids_are_refused_naming_the_input(bad):
    weight = Tensor(np.zeros((256, 2)))
    with pytest.raises(TypeError, match="embedding: ids must be integers"):
        embedding(weight, bad)
    with pytest.raises(TypeError, match="cross_entropy: targets must be integers"):
        cross_entropy(np.zeros((len(bad), 256)), bad)
    with pytest.raises(TypeError, match=r"ids\[0, 0\] = .* is not an integer id"):
        GlassLM(SMALL).loss(np.array([bad]), np.array([[1, 2]]))
    with pytest.raises(TypeError, match=r"targets\[0, 0\] = .* is not an integer id"):
        GlassLM(SMALL).loss(np.array([[1, 2]]), np.array([bad]))


def test_uint64_id_past_the_index_type_is_an_index_error():
    with pytest.raises(IndexError, match="embedding: ids holds 18446744073709551615"):
        embedding(np.zeros((4, 2)), np.array([2**64 - 1], dtype=np.uint64))


# --- item 4: truth value and the other protocols -------------------------------------------


@pytest.mark.parametrize(
    ("data", "truth"), [([0.0], False), (0.0, False), ([[2.5]], True), (-1.0, True), (np.nan, True)]
)
def test_one_element_truth_is_its_value(data, truth):
    assert bool(Tensor(data)) is truth
    assert (not Tensor(data)) is (not truth)


@pytest.mark.parametrize("data", [[0.0, 0.0], [[1.0], [1.0]], np.zeros((0,)), np.zeros((2, 0))])
def test_truth_of_other_sizes_is_ambiguous(data):
    t = Tensor(data)
    with pytest.raises(ValueError, match=r"truth value of a Tensor with .* is ambiguous"):
        bool(t)
    with pytest.raises(ValueError, match="ambiguous"):
        if t:
            pass


def test_len_iter_contains_and_scalars_follow_numpy():
    scalar, row = Tensor(3.0), Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(scalar)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(scalar)
    assert len(row) == 2 and len(Tensor(np.zeros((0, 3)))) == 0
    parts = list(row)
    assert [p.data.tolist() for p in parts] == [[1.0, 2.0], [3.0, 4.0]]
    parts[1].sum().backward()  # rows are views in the graph
    assert row.grad.tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert 4.0 in row and 5.0 not in row and Tensor(3.0) in Tensor([1.0, 3.0])
    assert 3 in scalar and np.nan not in Tensor([np.nan])  # NaN equals nothing (NumPy)
    assert float(Tensor([2.5])) == 2.5 and int(Tensor([[-2.7]])) == -2
    for convert in (float, int):
        with pytest.raises(ValueError, match="only one-element tensors"):
            convert(row)
    with pytest.raises(TypeError, match="cannot be used as an index"):
        [1, 2, 3][Tensor(1.0)]
    with pytest.raises(TypeError, match="cannot be used as an index"):
        range(Tensor(2.0))
    a, b = Tensor([1.0]), Tensor([1.0])
    assert a != b and len({a, b, a}) == 2  # == and hash are identity, as PyTorch's hash


# --- item 7: output the terminal cannot encode ---------------------------------------------


def test_printable_escapes_control_characters_only():
    text = "é€\n\tok\x1b[31m\x00\x07\x7f\x85\u202eЖ"
    assert printable(text) == "é€\n\tok\\x1b[31m\\x00\\x07\\x7f\\x85\\u202eЖ"
    assert printable("plain text\n") == "plain text\n"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "tiny.npz"
    tiny = [
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
    assert main(["train", "--steps", "1", "--out", str(path), *tiny]) == 0
    return path


def test_train_prints_the_parameter_count(checkpoint, capsys):
    tiny = [
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
    out = checkpoint.with_name("count.npz")
    assert main(["train", "--steps", "1", "--out", str(out), *tiny]) == 0
    # 256·16 (embedding) + 16·256 (head) + 16 (final norm) + 1568 (one block)
    assert capsys.readouterr().out.startswith("trained 1 steps (9,776 parameters) on ")


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("cp1252", b"A\\x1b[2J\x80?\\x07\n"),  # euro is 0x80 in cp1252; the Cyrillic letter is not
        ("ascii", b"A\\x1b[2J??\\x07\n"),
        ("utf-8", "A\\x1b[2J€Ж\\x07\n".encode()),
    ],
)
def test_generate_prints_with_any_output_encoding(checkpoint, encoding, expected):
    env = {**os.environ, "PYTHONIOENCODING": encoding}
    base = [sys.executable, "-m", "glassllm.apps.cli", "generate", "--checkpoint", str(checkpoint)]
    echo = subprocess.run(
        [*base, "--prompt", "A\x1b[2J€Ж\x07", "--max-new-tokens", "0"],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert echo.returncode == 0, echo.stderr
    assert echo.stdout == expected
    sampled = subprocess.run(
        [*base, "--prompt", "\u00e9", "--max-new-tokens", "40", "--temperature", "5"],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert sampled.returncode == 0, sampled.stderr
    assert b"\x1b" not in sampled.stdout and len(sampled.stdout) > 1


# --- item 8: boundaries that convert silently ----------------------------------------------


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        ([104.9, 105.99], TypeError, r"ids\[0\] = 104.9 is not an integer id \(got float\)"),
        ([0.5], TypeError, r"ids\[0\] = 0.5 is not an integer id"),
        ([104, 105.0], TypeError, r"ids\[1\] = 105.0 is not an integer id"),
        ([104, True], TypeError, r"ids\[1\] = True is not an integer id \(got bool\)"),
        (np.array([1.0]), TypeError, r"ids\[0\] = 1.0 is not an integer id"),
        ([[1, 2], [3, "4"]], TypeError, r"ids\[1, 1\] = '4' is not an integer id \(got str\)"),
        ([104, 256], ValueError, r"ids\[1\] = 256 is out of range \[0, 256\)"),
        ([-1], ValueError, r"ids\[0\] = -1 is out of range"),
        ([2**70], ValueError, "outside the 64-bit range"),
    ],
)
def test_decode_refuses_ids_that_are_not_bytes(ids, error, message):
    with pytest.raises(error, match=message):
        ByteTokenizer().decode(ids)


def test_encode_takes_text_only():
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        ByteTokenizer().encode(b"hi")


@pytest.mark.parametrize("dtype", [*SMALL_IDS, np.int64], ids=lambda d: np.dtype(d).name)
def test_decode_accepts_every_integer_dtype(dtype):
    assert ByteTokenizer().decode(np.array([104, 105], dtype=dtype)) == "hi"


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: GlassConfig(d_model=16.0, n_heads=2), TypeError, "d_model must be an integer"),
        (lambda: GlassConfig(n_layers=True), TypeError, "n_layers must be an integer, got bool"),
        (lambda: GlassConfig(seed=1.5), TypeError, "seed must be an integer, got float"),
        (lambda: GlassConfig(seed=-1), ValueError, "seed must be an integer >= 0"),
        (lambda: GlassConfig(max_seq_len=0), ValueError, "max_seq_len must be an integer >= 1"),
        (lambda: GlassConfig(norm_eps=float("nan")), ValueError, "norm_eps must be a finite"),
        (lambda: GlassConfig(rope_theta="1e4"), TypeError, "rope_theta must be a real number"),
        (lambda: rope_angles(4.0, 8), TypeError, "n must be an integer"),
        (lambda: rope_angles(4, 8.0), TypeError, "dk must be an integer"),
        (lambda: GlassLM(SMALL).generate([1], 2.0), TypeError, "max_new_tokens must be an integer"),
        (
            lambda: GlassLM(SMALL).generate([1], 2, top_k=0),
            ValueError,
            "top_k must be an integer >= 1",
        ),
        (lambda: GlassLM(SMALL).generate([1], 2, top_k=1.5), TypeError, "top_k must be an integer"),
        (lambda: GlassLM(SMALL).generate([1], 2, temperature=-1.0), ValueError, "temperature must"),
        (lambda: GlassLM(SMALL).generate([1.7], 2), TypeError, r"ids\[0\] = 1.7"),
        (lambda: GlassLM(SMALL).generate([300], 2), ValueError, r"ids\[0\] = 300 is out of range"),
        (
            lambda: GlassLM(SMALL).loss([[1, 2]], [[1, 2, 3]]),
            ValueError,
            "targets must have the shape",
        ),
        (
            lambda: get_batch(np.arange(20), 2.0, 4, np.random.default_rng()),
            TypeError,
            "batch_size",
        ),
        (lambda: get_batch(np.arange(20), 2, True, np.random.default_rng()), TypeError, "seq_len"),
        (
            lambda: get_batch(np.arange(20.0), 2, 4, np.random.default_rng()),
            TypeError,
            r"data\[0\]",
        ),
        (lambda: train(GlassLM(SMALL), np.arange(40), steps=1.5), TypeError, "steps must be"),
        (lambda: train(GlassLM(SMALL), np.arange(40), seed=True), TypeError, "seed must be"),
        (
            lambda: train(GlassLM(SMALL), np.arange(40), steps=1, batch_size=0),
            ValueError,
            "batch_size must be an integer >= 1",
        ),
        (
            lambda: train(GlassLM(SMALL), np.arange(250, 290), steps=1),
            ValueError,
            r"data\[6\] = 256 is out of range",
        ),
    ],
)
def test_counts_and_ids_at_library_doors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_head_counts_must_be_ints():
    from glassllm.layers import attention

    x = Tensor(np.zeros((1, 2, 4)))
    w = [Tensor(np.zeros(s)) for s in [(4, 4), (4, 2), (4, 2), (4, 4)]]
    cos, sin = rope_angles(2, 2)
    # the wording of the one rule for counts (glassllm.shapes.positive_count)
    with pytest.raises(TypeError, match=r"n_heads must be a positive int, got 2\.0"):
        attention(x, *w, 2.0, 1, cos, sin)
    with pytest.raises(TypeError, match="n_kv_heads must be a positive int, got True"):
        attention(x, *w, 2, True, cos, sin)


def test_check_int_accepts_numpy_integers():
    assert check_int("n", np.uint8(3), minimum=0) == 3
    assert id_array(np.array([[1, 2]], dtype=np.uint16), high=3).dtype == np.intp


# --- decided: reductions and softmax over a zero-length axis (as PyTorch) -----------------


def test_softmax_over_an_empty_axis_is_empty():
    x = Tensor(np.zeros((3, 0)), requires_grad=True)
    for op in (softmax, log_softmax):
        out = op(x, axis=-1)
        assert out.shape == (3, 0)
        out.backward(np.zeros((3, 0)))
        assert x.grad.shape == (3, 0)
    assert softmax_np(np.zeros((0, 4)), axis=0).shape == (0, 4)
    with pytest.raises(np.exceptions.AxisError):
        softmax(x, axis=2)


def test_sum_mean_and_max_over_an_empty_axis():
    x = Tensor(np.zeros((2, 0)), requires_grad=True)
    assert tsum(x, axis=1).data.tolist() == [0.0, 0.0]
    with np.errstate(invalid="ignore"):
        assert np.isnan(mean(x, axis=1).data).all() and np.isnan(mean(x).item())
    assert tmax(Tensor(np.zeros((0, 3))), axis=1).shape == (0,)  # the reduced axis is not empty
    for axis in (1, -1, None, (0, 1)):
        with pytest.raises(ValueError, match=r"max: axis 1 of a \(shape \(2, 0\)\) has length 0"):
            tmax(x, axis=axis)
