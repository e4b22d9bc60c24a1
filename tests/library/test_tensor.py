"""Tensor, the backward engine and no_grad (L0)."""

import ast
import inspect
import textwrap
import threading

import numpy as np
import pytest

import glassllm
from glassllm import Tensor, no_grad
from glassllm import autograd as ag


def test_package_root_exports():
    assert glassllm.__all__ == sorted(glassllm.__all__)
    assert {"Tensor", "no_grad", "gradcheck", "__version__"} <= set(glassllm.__all__)
    assert isinstance(glassllm.__version__, str)


def test_autograd_all_is_exactly_the_spec_names_sorted():
    spec = {
        "add sub mul div neg pow exp log matmul tsum mean max reshape transpose getitem where "
        "embedding masked_fill softmax log_softmax softmax_np sigmoid silu cross_entropy "
        "cross_entropy_grad rope repeat_kv "
        "relu tanh sqrt gelu gelu_tanh"  # micrograd's and the field's activations
    }
    names = set(next(iter(spec)).split())
    assert set(ag.__all__) == names
    assert ag.__all__ == sorted(ag.__all__)
    for name in ag.__all__:
        assert callable(getattr(ag, name)) and getattr(ag, name).__doc__


@pytest.mark.parametrize("data", [3, True, [1, 2], np.arange(3, dtype=np.int32), [[1.5]]])
def test_data_is_always_float64(data):
    t = Tensor(data)
    assert t.data.dtype == np.float64
    assert t.requires_grad is False and t.grad is None


def test_data_is_copied_from_the_callers_array():
    a = np.ones(3)
    t = Tensor(a)
    a[0] = 5.0
    assert t.data[0] == 1.0


def test_shape_ndim_item_repr_detach_zero_grad():
    x = Tensor([[1.0, 2.0]], requires_grad=True)
    assert x.shape == (1, 2) and x.ndim == 2
    assert "requires_grad=True" in repr(x) and "1." in repr(x)
    y = x * 2
    assert "op='mul'" in repr(y)
    assert Tensor([4.0]).item() == 4.0
    with pytest.raises(ValueError, match="exactly one element"):
        x.item()
    d = y.detach()
    assert d.requires_grad is False and d.data is y.data
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 2.0]]
    x.zero_grad()
    assert x.grad is None


def test_backward_requires_grad_output_for_non_scalar():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match="pass grad_output"):
        (x * 2).backward()
    with pytest.raises(ValueError, match=r"grad_output has shape \(3,\).*\(2,\)"):
        (x * 2).backward(np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor([1.0]).backward()
    (x * 2).backward(np.array([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_gradients_accumulate_across_calls_and_uses():
    x = Tensor([3.0], requires_grad=True)
    y = x * x + x  # x used three times
    y.backward()
    assert x.grad.tolist() == [7.0]
    y.backward()  # accumulates like PyTorch
    assert x.grad.tolist() == [14.0]


def test_diamond_graph():
    x = Tensor([2.0], requires_grad=True)
    a = x * 3.0
    b = ag.exp(a)
    c = a * b  # a reaches c twice
    c.backward()
    # d/dx (3x e^{3x}) = 3 e^{3x} + 9x e^{3x}
    np.testing.assert_allclose(x.grad, [3 * np.exp(6) + 18 * np.exp(6)], rtol=1e-14)


def test_chain_ten_thousand_ops_deep():
    x = Tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad, [1.0001**10_000], rtol=1e-9)


def test_the_backward_walk_reads_on_one_screen():
    """STYLE.md: Tensor.backward is the topological order and the chain rule in at most
    30 lines of code (its docstring, blank lines and comments aside), as micrograd's and
    HIPS autograd's walks are; the copy-avoidance lives in one helper beside it."""
    source = textwrap.dedent(inspect.getsource(Tensor.backward))
    fn = ast.parse(source).body[0]
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    lines = source.splitlines()[body[0].lineno - 1:fn.end_lineno]
    code = [line for line in lines if line.strip() and not line.strip().startswith("#")]
    assert len(code) <= 30, "\n".join(code)
    calls = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name)}
    assert {"_topological_order", "_Gradients"} <= calls


def test_grad_flows_only_to_tensors_that_require_it():
    w = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([5.0, 5.0])
    (w * c).sum().backward()
    assert c.grad is None
    assert w.grad.tolist() == [5.0, 5.0]


def test_reflected_operators_and_numpy_on_the_left():
    x = Tensor([2.0], requires_grad=True)
    for expr, expected_value, expected_grad in [
        (lambda: 2 - x, 0.0, -1.0),
        (lambda: 1 / x, 0.5, -0.25),
        (lambda: 3 * x, 6.0, 3.0),
        (lambda: 1 + x, 3.0, 1.0),
        (lambda: -x, -2.0, -1.0),
        (lambda: x**3, 8.0, 12.0),
        (lambda: 2**x, 4.0, 4.0 * np.log(2.0)),
        (lambda: np.array([1.0]) + x, 3.0, 1.0),
        (lambda: np.array([[1.0]]) @ x, 2.0, 1.0),
    ]:
        x.zero_grad()
        out = expr()
        assert isinstance(out, Tensor)
        np.testing.assert_allclose(out.data.ravel(), [expected_value])
        out.sum().backward()
        np.testing.assert_allclose(x.grad, [expected_grad])


def test_methods_delegate_to_functional_ops():
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.sum().item() == 15.0
    assert x.mean(axis=0).data.tolist() == [1.5, 2.5, 3.5]
    assert x.max(axis=1, keepdims=True).data.tolist() == [[2.0], [5.0]]
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape((6,)).shape == (6,)
    assert x.transpose().shape == (3, 2) and x.T.shape == (3, 2)
    assert x.transpose(1, 0).data.tolist() == x.data.T.tolist()
    assert x[1, ::2].data.tolist() == [3.0, 5.0]
    assert x.T.op == "transpose" and x.is_leaf and not x.T.is_leaf


def test_no_grad_context_and_decorator():
    x = Tensor([1.0], requires_grad=True)
    with no_grad():
        assert not glassllm.is_grad_enabled()
        assert not (x * 2).requires_grad
        with no_grad():
            pass
        assert not glassllm.is_grad_enabled()
    assert glassllm.is_grad_enabled()

    @no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_no_grad_in_one_thread_does_not_affect_another():
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def holder():
        with no_grad():
            inside.set()
            release.wait(5)
            seen["holder"] = (Tensor([1.0], requires_grad=True) * 2).requires_grad

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(5)
    x = Tensor([3.0], requires_grad=True)
    y = (x * x).sum()  # built while the other thread sits in no_grad
    assert y.requires_grad
    y.backward()
    release.set()
    t.join(5)
    assert x.grad.tolist() == [6.0]
    assert seen["holder"] is False


def test_retain_grad_keeps_intermediate_gradients():
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = (x * 3).retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_data_is_read_only_so_a_backward_sees_what_the_forward_saw():
    """Mutating saved data between forward and backward silently corrupts gradients in
    libraries that allow it; here the data is read-only and rebinding keeps the graph's copy."""
    w = Tensor([1.0, 2.0], requires_grad=True)
    x = Tensor([3.0, 4.0], requires_grad=True)
    y = (w * x).sum()
    with pytest.raises(ValueError, match="read-only"):
        w.data[0] = 100.0
    w.data = np.array([100.0, 100.0])  # rebinding: the graph keeps the old array
    y.backward()
    assert x.grad.tolist() == [1.0, 2.0]
    assert w.grad.tolist() == [3.0, 4.0]
    assert not (x * 2).data.flags.writeable
    with pytest.raises(TypeError, match="real numbers"):
        w.data = "abc"
    src = np.ones(2)
    t = Tensor(src)
    src[0] = 9.0  # the caller's array stays writable and is not shared
    assert t.data.tolist() == [1.0, 1.0] and src.flags.writeable


def test_grad_assignment_must_match_the_shape():
    t = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"shape \(2,\) \(L0\.5\), got \(2, 2\)"):
        t.grad = np.ones((2, 2))
    t.grad = [1.0, 1.0]
    (t * 2).sum().backward()
    assert t.grad.tolist() == [3.0, 3.0]


def test_no_grad_bare_decorator_generators_and_coroutines():
    import asyncio

    x = Tensor([1.0], requires_grad=True)

    @no_grad
    def bare(t):
        return t * 2

    assert not bare(x).requires_grad

    @no_grad()
    def steps():
        for _ in range(2):
            yield glassllm.is_grad_enabled()

    seen = []
    for mode in steps():
        seen.append((mode, glassllm.is_grad_enabled()))  # the caller keeps grad on between steps
    assert seen == [(False, True), (False, True)]

    @no_grad
    async def inside():
        await asyncio.sleep(0.01)
        return glassllm.is_grad_enabled()

    async def outside():
        await asyncio.sleep(0.005)
        return glassllm.is_grad_enabled()

    async def both():
        return await asyncio.gather(inside(), outside())

    assert asyncio.run(both()) == [False, True]  # per task, not per process (H6)
    with pytest.raises(TypeError, match="no arguments"):
        no_grad(3)


def test_one_no_grad_object_shared_by_overlapping_tasks_and_threads():
    import asyncio

    shared = no_grad()

    async def task(delay):
        with shared:
            await asyncio.sleep(delay)
            inside = glassllm.is_grad_enabled()
        return inside, glassllm.is_grad_enabled()

    async def both():
        return await asyncio.gather(task(0.01), task(0.02))

    assert asyncio.run(both()) == [(False, True), (False, True)]

    @no_grad
    async def agen():
        for _ in range(2):
            await asyncio.sleep(0)
            yield (Tensor([1.0], requires_grad=True) * 2).requires_grad

    async def collect():
        return [(made, glassllm.is_grad_enabled()) async for made in agen()]

    assert asyncio.run(collect()) == [(False, True), (False, True)]


def test_numpy_array_of_a_tensor_is_a_writable_copy_asarray_a_read_only_view():
    t = Tensor([1.0, 2.0])
    copied = np.array(t)
    copied[0] = 5.0
    assert t.data.tolist() == [1.0, 2.0]
    view = np.asarray(t)
    assert np.shares_memory(view, t.data) and not view.flags.writeable


def test_backward_hands_over_a_fresh_gradient_and_copies_any_aliased_one():
    """No copy nobody needs, and a copy wherever the array is reachable (L0.5).

    mul's gradients are new arrays sent to one place each: handed over (the arrays the
    closure made are the leaf's .grad). add's backward sends the one incoming `g` to both
    inputs, and the caller keeps its seed: each leaf gets its own copy, so writing into
    one .grad changes nothing else the caller can see.
    """
    seen = []
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 5.0], requires_grad=True)
    out = ag.mul(a, b)
    inner = out._backward

    def spy(g):
        grads = inner(g)
        seen.extend(grads)
        return grads

    out._backward = spy
    seed = np.array([1.0, 10.0])
    out.backward(seed)
    assert a.grad is seen[0] and b.grad is seen[1]  # handed over, not copied
    assert a.grad.tolist() == [3.0, 50.0] and b.grad.tolist() == [1.0, 20.0]

    x = Tensor([1.0, 2.0], requires_grad=True)
    y = Tensor([4.0, 8.0], requires_grad=True)
    ag.add(x, y).backward(seed)  # g goes to both: the caller's seed, shared twice
    assert x.grad is not seed and y.grad is not seed and x.grad is not y.grad
    x.grad[0] = 99.0  # the caller owns it, and nobody else sees the change
    assert y.grad.tolist() == [1.0, 10.0] and seed.tolist() == [1.0, 10.0]
    assert x.grad.flags.writeable and y.grad.flags.writeable


def test_leaf_grad_is_never_a_view_of_another_array():
    x = Tensor(np.arange(6.0), requires_grad=True)
    ag.reshape(x, (2, 3)).backward(np.ones((2, 3)))  # reshape's gradient is a view of g
    assert x.grad.flags.owndata and x.grad.flags.writeable
    z = Tensor([2.0, 3.0], requires_grad=True)
    ag.tsum(z).backward()  # a read-only broadcast of the seed
    assert z.grad.flags.writeable and z.grad.tolist() == [1.0, 1.0]
    z.grad[0] = 7.0
    assert z.grad.tolist() == [7.0, 1.0]


def test_one_op_on_leaves_gets_every_leaf_once_and_shared_uses_summed():
    """L0.5 (the engine's shortcut for one op on leaves): a leaf used twice gets
    the sum of both uses, a leaf that does not require grad gets nothing, and the same
    graph one op deeper gives the same gradients as the general walk."""
    x = Tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    c = Tensor([10.0, 20.0])                                   # no grad
    ag.mul(x, x).backward(np.ones((2, 2)))
    np.testing.assert_array_equal(x.grad, 2 * x.data)          # d(x*x)/dx = 2x
    x.grad = None
    ag.add(x, c).backward(np.full((2, 2), 3.0))
    np.testing.assert_array_equal(x.grad, np.full((2, 2), 3.0))
    assert c.grad is None
    x.grad = None
    ag.neg(ag.mul(x, x)).backward(np.ones((2, 2)))               # two ops: the full walk
    np.testing.assert_array_equal(x.grad, -2 * x.data)


def test_one_op_on_leaves_copies_an_array_it_sends_to_both_inputs_and_accumulates():
    """The engine's shortcut for one op on leaves: a new array a backward
    returns for both inputs is one array two leaves would share, so each gets a copy; a
    leaf that already holds a gradient gets the sum (L0.5)."""
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 4.0], requires_grad=True)
    out = ag.add(a, b)
    made = []

    def twice(g):
        new = g * 2.0  # a fresh array, sent to both inputs
        made.append(new)
        return new, new

    out._backward = twice
    b.grad = np.array([100.0, 100.0])
    out.backward(np.array([1.0, 5.0]))
    assert a.grad is not made[0] and b.grad is not made[0]
    assert a.grad.tolist() == [2.0, 10.0] and b.grad.tolist() == [102.0, 110.0]
    a.grad[0] = -1.0
    assert made[0].tolist() == [2.0, 10.0]


def test_repr_summarises_past_64_elements_only():
    assert "..." not in repr(Tensor(np.zeros(64)))
    assert "..." in repr(Tensor(np.zeros(65)))


def test_asarray_with_a_dtype_converts():
    arr = np.asarray(Tensor([1.5, -2.5]), dtype=np.int64)
    assert arr.dtype == np.int64 and arr.tolist() == [1, -2]


def test_reshape_takes_one_integer():
    assert Tensor(np.arange(6.0).reshape(2, 3)).reshape(6).shape == (6,)
    assert Tensor(np.arange(6.0)).reshape((3, 2)).shape == (3, 2)
