"""Gaps found by running researchers' notebook libraries unchanged under ``install_aliases()``: torchinfo's
and torchsummary's model summaries, captum's attributions (integrated gradients, DeepLift, GradCAM,
occlusion, Shapley sampling, layer and neuron conductance). Each test states the torch behaviour the
library relied on, against real torch (the libraries are not imported here)."""
import collections
import sys
import typing

import numpy as np
import torch

import tapelab


def test_a_storage_s_size_counts_its_bytes_as_torch_s():
    """torchinfo sizes inputs with ``sys.getsizeof(t.untyped_storage())``: the object plus its bytes."""
    for n in (0, 10, 2 * 28 * 28):
        ours = sys.getsizeof(tapelab.zeros(n).untyped_storage())
        theirs = sys.getsizeof(torch.zeros(n).untyped_storage())
        assert ours - 4 * n == sys.getsizeof(tapelab.zeros(0).untyped_storage()) and theirs - ours < 128
    assert sys.getsizeof(tapelab.zeros(6).storage()) >= 24


def test_future_is_generic_as_torch_s():
    """captum annotates ``-> Union[Tensor, Future[Tensor]]`` at import time."""
    for m in (tapelab, torch):
        alias = m.futures.Future[m.Tensor]
        assert typing.get_origin(alias) is m.futures.Future and typing.get_args(alias) == (m.Tensor,)
    f = tapelab.futures.Future()
    f.set_result(3)
    assert f.wait() == 3


def test_torch_utils_hooks_is_an_attribute_after_import():
    """captum annotates with ``torch.utils.hooks.RemovableHandle`` without importing the module."""
    handle = tapelab.nn.Linear(2, 2).register_forward_hook(lambda *a: None)
    assert isinstance(handle, tapelab.utils.hooks.RemovableHandle)
    assert hasattr(torch.utils, "hooks")


Pair = collections.namedtuple("Pair", "a b")


def _structure(m):
    x = m.tensor(np.arange(30, dtype=np.float32).reshape(5, 6))
    return (x, [x * 2, "tag"], {"mask": x > 3, "n": 7}, Pair(x[:, :2], 1.5))


def _chunks_as_torch(x, n, dim):
    return [c.numpy() for c in torch.tensor(x.numpy()).chunk(n, dim)]


def test_scatter_cuts_each_tensor_into_a_chunk_per_device_as_torch_chunks():
    """captum imports ``torch.nn.parallel.scatter_gather.scatter`` (for DataParallel models)."""
    from tapelab.nn.parallel.scatter_gather import gather, scatter, scatter_kwargs
    for dim in (0, 1):
        parts = scatter(_structure(tapelab), ["cpu", "cpu"], dim)
        x = _structure(tapelab)[0]
        want = _chunks_as_torch(x, 2, dim)
        assert len(parts) == 2
        for i, (t, lst, d, pair) in enumerate(parts):
            np.testing.assert_array_equal(t.numpy(), want[i])
            np.testing.assert_array_equal(lst[0].numpy(), want[i] * 2)
            assert lst[1] == "tag" and d["n"] == 7 and type(pair) is Pair and pair.b == 1.5
        joined = gather([p[0] for p in parts], "cpu", dim)
        np.testing.assert_array_equal(joined.numpy(), x.numpy())
        outs = gather([{"y": p[0], "none": None} for p in parts], -1, dim)
        np.testing.assert_array_equal(outs["y"].numpy(), x.numpy())
        assert outs["none"] is None
    args, kwargs = scatter_kwargs((tapelab.ones(4, 2),), {"scale": 2}, ["cpu", "cpu"])
    assert len(args) == len(kwargs) == 2 and kwargs[1] == {"scale": 2} and tuple(args[0][0].shape) == (2, 2)
    args, kwargs = scatter_kwargs((), {"x": tapelab.ones(4)}, ["cpu", "cpu"])
    assert args == ((), ()) and tuple(kwargs[0]["x"].shape) == (2,)
    assert tapelab.nn.parallel.scatter is scatter and tapelab.nn.parallel.gather is gather


def test_randint_like_takes_high_alone_as_torch():
    """torch_optimizer's Adahessian draws Rademacher vectors with ``randint_like(p, high=2)``."""
    for m in (tapelab, torch):
        x = m.zeros(200)
        r = m.randint_like(x, high=2)
        assert r.dtype == m.float32 and set(np.unique(r.numpy())) == {0.0, 1.0}
        assert 3 <= float(m.randint_like(x, 3, 5).min()) and float(m.randint_like(x, 5).max()) < 5
    import pytest
    with pytest.raises(TypeError):
        tapelab.randint_like(tapelab.zeros(2))


def _warnings_in_fresh_processes(setup: str, calls: str, shown: str) -> list:
    """What ``calls`` warn in a new process under tapelab and under torch (``m`` names the library):
    the count of warnings recorded, then ``shown``. PyTorch warns of these once per process."""
    import subprocess
    code = (f"import warnings\nimport {{m}} as m\n{setup}\n"
            f"with warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n    {calls}\n"
            f"print(len(w), {shown})\n")
    return [subprocess.run([sys.executable, "-c", code.format(m=m)], capture_output=True, text=True,
                           check=True).stdout for m in ("tapelab", "torch")]


def _deprecated_calls(m, x, y):
    return [x.clone().add_(2.0, y), x.clone().sub_(0.5, y), x.add(2.0, y), m.add(x, -1, y), m.sub(x, 2, y),
            x.clone().addcmul_(0.25, y, y), x.clone().addcdiv_(3, y, y + 1), x.addcmul(0.5, y, y),
            m.addcmul(x, 0.5, y, y), m.addcdiv(x, 2.0, y, y + 1)]


def test_the_deprecated_number_first_overloads_compute_and_warn_once_as_torch(recwarn):
    """Pre-1.5 optimizers (pytorch-ranger, many papers' code) write ``p.data.add_(-lr, d_p)`` and
    ``exp_avg_sq.addcmul_(1 - beta2, grad, grad)``; PyTorch 2.13 still runs them, warning once per
    process."""
    outs = _warnings_in_fresh_processes("x, y = m.tensor([1.0, -2.0, 3.0]), m.tensor([0.5, 4.0, -1.0])",
                                        "x.clone().add_(2.0, y); x.clone().addcmul_(0.5, y, y); m.sub(x, 2, y)",
                                        "str(w[0].message).splitlines()[:2]")
    assert outs[0] == outs[1] == "1 ['This overload of add_ is deprecated:', '\\tadd_(Number alpha, Tensor other)']\n"
    x, y = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    ours = _deprecated_calls(tapelab, tapelab.tensor(x), tapelab.tensor(y))
    theirs = _deprecated_calls(torch, torch.tensor(x), torch.tensor(y))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_script_types_are_importable_from_torch_c_and_nothing_is_one():
    """torchview's recorder imports ``torch._C.ScriptMethod`` for an isinstance test in ``__torch_function__``."""
    from tapelab._C import ScriptFunction, ScriptMethod
    assert ScriptFunction is tapelab.jit.ScriptFunction and hasattr(torch._C, "ScriptMethod")
    fn = tapelab.jit.script(lambda x: x + 1)
    assert not isinstance(fn, (ScriptMethod, ScriptFunction))


def test_backward_with_create_graph_warns_of_the_cycle_once_as_torch():
    """Adahessian calls ``loss.backward(create_graph=True)`` every step; PyTorch warns once per process."""
    outs = _warnings_in_fresh_processes(
        "x = m.ones(2, requires_grad=True)",
        "for _ in range(3): (x * x).sum().backward(create_graph=True)\n"
        "    m.autograd.grad((x * x).sum(), x, create_graph=True)",
        "str(w[0].message)[:60], x.grad.tolist()")
    assert outs[0] == outs[1]
    assert outs[0].startswith("1 Using backward() with create_graph=True will create a refere")


def test_opacus_import_paths_resolve_under_aliases():
    """opacus imports ``torch.distributed._tensor.experimental.implicit_replication`` (DTensor's pre-2.4
    path), ``torch.utils.data._utils.collate.default_collate`` and ``dataloader._collate_fn_t``."""
    import subprocess
    code = ("import tapelab; tapelab.install_aliases()\n"
            "from torch.distributed._tensor.experimental import implicit_replication\n"
            "from torch.distributed._tensor import DTensor\n"
            "from torch.utils.data._utils.collate import default_collate\n"
            "from torch.utils.data.dataloader import _collate_fn_t, _worker_init_fn_t\n"
            "import torch\n"
            "with implicit_replication():\n"
            "    b = default_collate([torch.ones(2), torch.zeros(2)])\n"
            "print(tuple(b.shape), DTensor.__module__, default_collate is torch.utils.data.default_collate)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "(2, 2) tapelab.distributed.tensor True\n"
    import torch.distributed.tensor.experimental as theirs
    from tapelab.distributed.tensor import experimental as ours
    assert ours.__all__ == ["implicit_replication"] and hasattr(theirs, "implicit_replication")
