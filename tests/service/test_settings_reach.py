"""Every configuration field reaches the code it sets: a non-default
value changes what it should, and nothing else.

A `GlassLM` that ignored ``rope_theta`` passed every test; so would an optimizer that
ignored ``betas`` or a trainer that ignored ``max_grad_norm``. Fields covered here:
`GlassConfig` (L7), `SGD` / `AdamW` / `clip_grad_norm` (glassllm.optim), `train`
(glassllm.training.loop), and the service's GLASSLLM_* variables (H5; their boundaries are in
tests/service/test_limits_boundary.py, here they are read from the environment).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm import Tensor
from glassllm.layers import GlassConfig, GlassLM
from glassllm.optim import SGD, AdamW, clip_grad_norm
from glassllm.training.loop import train
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

SMALL = GlassConfig(vocab=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=16,
                    max_seq_len=8)
IDS = np.array([[1, 5, 3, 9, 2, 7]])


def logits(config: GlassConfig) -> np.ndarray:
    return GlassLM(config).forward(IDS).data


def weights(config: GlassConfig) -> dict[str, np.ndarray]:
    return GlassLM(config).state_dict()


def same_weights(a: GlassConfig, b: GlassConfig) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)


# --------------------------------------------------------------------------------------
# GlassConfig
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("rope_theta", 100.0), ("rope_theta", 1e6),
                                         ("norm_eps", 10.0)])
def test_a_config_field_changes_the_logits_of_the_same_weights(field, value):
    other = dataclasses.replace(SMALL, **{field: value})
    assert same_weights(SMALL, other)                # only the computation differs
    diff = np.max(np.abs(logits(SMALL) - logits(other)))
    assert diff > 1e-6, (field, diff)


def test_rope_theta_acts_only_through_the_positions():
    """Position 0 is not rotated: its logits ignore rope_theta; every later position not."""
    a, b = logits(SMALL), logits(dataclasses.replace(SMALL, rope_theta=100.0))
    # bit for bit: the same code on arrays of the same shapes; row 0 is rotated by
    # cos 0 = 1, sin 0 = 0 exactly and attends to itself alone
    np.testing.assert_array_equal(a[:, 0], b[:, 0])
    assert all(np.max(np.abs(a[:, t] - b[:, t])) > 1e-9 for t in range(1, IDS.shape[1]))


def test_n_heads_changes_the_attention_of_the_same_weights():
    two = dataclasses.replace(SMALL, n_heads=2, n_kv_heads=2)
    four = dataclasses.replace(SMALL, n_heads=4, n_kv_heads=4)   # wq, wk, wv stay (8, 8)
    assert same_weights(two, four)
    assert np.max(np.abs(logits(two) - logits(four))) > 1e-6


def test_n_kv_heads_sets_the_key_and_value_widths():
    for hkv in (1, 2):
        w = weights(dataclasses.replace(SMALL, n_heads=2, n_kv_heads=hkv))
        assert w["blocks.0.attn.wk"].shape == (8, hkv * 4)
        assert w["blocks.0.attn.wv"].shape == (8, hkv * 4)
        assert w["blocks.0.attn.wq"].shape == (8, 8)


@pytest.mark.parametrize("field,value,name,shape", [
    ("vocab", 20, "tok_emb.weight", (20, 8)),
    ("d_model", 12, "tok_emb.weight", (16, 12)),
    ("ffn_hidden", 24, "blocks.0.ffn.w1", (8, 24)),
])
def test_a_size_field_sets_the_parameter_shapes(field, value, name, shape):
    config = dataclasses.replace(SMALL, **{field: value})
    assert weights(config)[name].shape == shape
    assert logits(config).shape == (1, IDS.shape[1], config.vocab)


def test_n_layers_sets_the_number_of_blocks():
    for n in (1, 3):
        names = weights(dataclasses.replace(SMALL, n_layers=n)).keys()
        assert {k.split(".")[1] for k in names if k.startswith("blocks.")} == {
            str(i) for i in range(n)}


def test_max_seq_len_is_the_longest_input_exactly():
    model = GlassLM(dataclasses.replace(SMALL, max_seq_len=6))
    assert model.forward(IDS).data.shape == (1, 6, 16)                 # exactly 6: runs
    with pytest.raises(ValueError, match="sequence length 7 exceeds max_seq_len 6"):
        model.forward(np.array([[1] * 7]))


def test_seed_fixes_the_weights():
    assert same_weights(SMALL, dataclasses.replace(SMALL))
    assert not same_weights(SMALL, dataclasses.replace(SMALL, seed=1))


def test_every_config_field_is_covered_here():
    covered = {"vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
               "rope_theta", "norm_eps", "max_seq_len", "seed"}
    assert {f.name for f in dataclasses.fields(GlassConfig)} == covered


# --------------------------------------------------------------------------------------
# optimizers
# --------------------------------------------------------------------------------------

GRADS = [np.array([0.5, -2.0, 1e-4]), np.array([-1.0, 3.0, 2e-4]), np.array([0.2, 0.1, 0.0])]


def steps(cls, **kwargs) -> np.ndarray:
    p = Tensor(np.array([1.0, -1.0, 0.5]), requires_grad=True)
    opt = cls([p], **kwargs)
    for g in GRADS:
        p.grad = g.copy()
        opt.step()
    return p.data.copy()


@pytest.mark.parametrize("cls,field,value", [
    (SGD, "lr", 0.5), (SGD, "momentum", 0.9), (SGD, "weight_decay", 0.1),
    (AdamW, "lr", 0.01), (AdamW, "betas", (0.5, 0.999)), (AdamW, "betas", (0.9, 0.5)),
    (AdamW, "eps", 1e-3), (AdamW, "weight_decay", 0.5),
])
def test_every_optimizer_argument_changes_the_trajectory(cls, field, value):
    default = steps(cls)
    changed = steps(cls, **{field: value})
    assert np.max(np.abs(default - changed)) > 1e-7, (cls.__name__, field)


def test_lr_zero_leaves_the_parameters_where_they_are():
    np.testing.assert_array_equal(steps(SGD, lr=0.0, momentum=0.9), [1.0, -1.0, 0.5])
    np.testing.assert_array_equal(steps(AdamW, lr=0.0), [1.0, -1.0, 0.5])


def test_clip_grad_norm_at_its_boundary_follows_torch():
    """torch.nn.utils.clip_grad_norm_: coef = min(max_norm / (norm + 1e-6), 1), applied
    always. At max_norm = norm + 1e-6 the coefficient is exactly 1: unchanged;
    at max_norm = norm it is 5 / (5 + 1e-6): scaled."""
    p = Tensor(np.zeros(2), requires_grad=True)
    p.grad = np.array([3.0, 4.0])
    assert clip_grad_norm([p], 5.0 + 1e-6) == 5.0
    np.testing.assert_array_equal(p.grad, [3.0, 4.0])
    p.grad = np.array([3.0, 4.0])
    assert clip_grad_norm([p], 5.0) == 5.0
    assert p.grad[0] < 3.0
    np.testing.assert_allclose(p.grad, np.array([3.0, 4.0]) * 5.0 / (5.0 + 1e-6), rtol=1e-15)


# --------------------------------------------------------------------------------------
# train()
# --------------------------------------------------------------------------------------

DATA = np.arange(200) % 16
TRAIN = dict(steps=2, batch_size=2, seq_len=4)


def trained(**kwargs) -> tuple[list[float], dict[str, np.ndarray], int]:
    model = GlassLM(SMALL)
    result = train(model, DATA, **{**TRAIN, **kwargs})
    return result.losses, model.state_dict(), result.tokens


def moved(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


@pytest.mark.parametrize("field,value", [("lr", 0.05), ("weight_decay", 5.0),
                                         ("max_grad_norm", 1e-12), ("seed", 7)])
def test_every_train_setting_changes_the_trained_weights(field, value):
    _, base, _ = trained()
    _, other, _ = trained(**{field: value})
    assert moved(base, other) > 1e-7, field


def test_steps_batch_size_and_seq_len_set_the_work():
    losses, _, tokens = trained(steps=3, batch_size=3, seq_len=5)
    assert len(losses) == 3 and tokens == 3 * 3 * 5
    seen = []
    train(GlassLM(SMALL), DATA, **TRAIN, on_step=lambda s, loss, tps: seen.append((s, loss)))
    assert [s for s, _ in seen] == [1, 2] and all(np.isfinite(loss) for _, loss in seen)


def test_the_seed_changes_the_batches():
    a, _, _ = trained(seed=0)
    b, _, _ = trained(seed=1)
    assert a[0] != b[0]


# --------------------------------------------------------------------------------------
# the service's GLASSLLM_* variables, read from the environment
# --------------------------------------------------------------------------------------

ENV = {"MAX_BODY_BYTES": 4096, "MAX_JSON_DEPTH": 7, "MAX_ARRAY_ELEMENTS": 11,
       "MAX_RESULT_ELEMENTS": 13, "MAX_MATMUL_MADDS": 17, "MAX_CONCURRENCY": 3,
       "RETRY_AFTER_SECONDS": 9, "MAX_EXPRESSION_LENGTH": 19, "MAX_CHECK_ELEMENTS": 5,
       # admission, workers, observability, CORS, the token
       "WORKERS": 2, "MAX_QUEUE": 23, "QUEUE_TIMEOUT_S": 2.5, "LARGE_COST": 29,
       "BLAS_THREADS": 2, "LOG_FORMAT": "json", "CORS_ORIGINS": "https://a.example",
       "API_TOKEN": "t0k",
       # cases of a batch
       "MAX_BATCH": 31,
       # what one request returns and holds
       "MAX_ANSWER_ELEMENTS": 37,
       # the embedded server's guard against slow and idle peers (glassllm_service/server.py)
       "HEADER_TIMEOUT_S": 1.5, "BODY_TIMEOUT_S": 2.5, "SEND_TIMEOUT_S": 3.5,
       "KEEPALIVE_TIMEOUT_S": 4.5, "MAX_CONNECTIONS": 41,
       # the Host names answered (glassllm_service/security.py)
       "TRUSTED_HOSTS": "sandbox.example,*.course.example",
       # the Train view's endpoints
       "MAX_TRAINING_RUNS": 3, "MAX_TRAINING_QUEUE": 61, "MAX_TRAIN_STEPS": 43,
       "MAX_PARAMETERS": 47, "MAX_CORPUS_BYTES": 53, "MAX_TRAIN_SECONDS": 5.5,
       "MAX_TRAIN_BATCH": 59}
FLAGS = ("ACCESS_LOG", "METRICS")            # on by default; "0" in the environment: off
# the course: each away from its default (docs/modes.md); the exercise directory is a
# temporary one, since the setting refuses a path that is not a directory
COURSE = {"MODE": "course", "GRADED_SESSION": True, "COURSE_SALT": "s4lt",
          "SHIPPED_EXERCISES": True,
          # the class record (docs/record.md)
          "COURSE_ID": "ml-101", "COURSE_SECRETS": "k1=" + "x" * 32, "TOKEN_DAYS": 30.0,
          "REVOCATION_REFRESH_S": 2.5,
          "DATABASE_URL": "postgresql://u:p@db:5432/course", "DB_POOL_SIZE": 3,
          "REPLICAS": 5, "RECORD_RETENTION_DAYS": 200}


def test_every_limit_variable_is_read_from_the_environment(monkeypatch, tmp_path):
    for name, value in ENV.items():
        monkeypatch.setenv(f"GLASSLLM_{name}", str(value))
    for name in FLAGS:
        monkeypatch.setenv(f"GLASSLLM_{name}", "0")
    for name, value in COURSE.items():
        monkeypatch.setenv(f"GLASSLLM_{name}", "1" if value is True else str(value))
    monkeypatch.setenv("GLASSLLM_EXERCISES_DIR", str(tmp_path))
    monkeypatch.setenv("GLASSLLM_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GLASSLLM_WHEELHOUSE", str(tmp_path))
    s = Settings()
    for name, value in {**ENV, **COURSE}.items():
        assert getattr(s, name.lower()) == value, name
    for name in FLAGS:
        assert getattr(s, name.lower()) is False, name
    assert s.exercises_dir == tmp_path == s.wheelhouse and s.data_dir == tmp_path
    fields = {f for f in Settings.model_fields if f != "static_dir"}
    assert fields == {n.lower() for n in (*ENV, *FLAGS, *COURSE, "EXERCISES_DIR", "DATA_DIR",
                                          "WHEELHOUSE")}


def test_an_environment_limit_reaches_the_routes(monkeypatch):
    monkeypatch.setenv("GLASSLLM_MAX_ARRAY_ELEMENTS", "2")
    monkeypatch.setenv("GLASSLLM_MAX_EXPRESSION_LENGTH", "5")
    with TestClient(create_app()) as c:
        ok = c.post("/api/v1/ops/neg", content=b'{"inputs": {"a": [1.0, 2.0]}}',
                    headers={"Content-Type": "application/json"})
        big = c.post("/api/v1/ops/neg", content=b'{"inputs": {"a": [1.0, 2.0, 3.0]}}',
                     headers={"Content-Type": "application/json"})
        long = c.post("/api/v1/eval", content=orjson.dumps(
            {"expression": "x  * 2", "variables": {"x": [1.0]}}),
            headers={"Content-Type": "application/json"})
    assert ok.status_code == 200 and big.status_code == 413 and long.status_code == 422
    assert long.json()["error"]["code"] == "expression_too_long"


def test_static_dir_serves_that_page(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<!doctype html><title>mine</title>")
    monkeypatch.setenv("GLASSLLM_STATIC_DIR", str(tmp_path))
    with TestClient(create_app()) as c:
        r = c.get("/")
    assert r.status_code == 200 and "<title>mine</title>" in r.text
