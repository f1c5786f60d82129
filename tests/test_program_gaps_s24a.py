"""Gaps found in session 24 (helper A) running the LLM-training ecosystem under ``install_aliases()``:
litgpt (GPT in seven families, generate, LoRA/merge, adapters, Fabric training in 32/bf16-mixed/bf16-true,
fabric.save/load and load_checkpoint), lightning's Trainer (callbacks, checkpoints, resume, predict),
trl (SFTTrainer, DPOTrainer with three losses, RewardTrainer on tiny transformers models, its logprob
helpers), karpathy's minGPT (sort demo with its Trainer), torchscale (RetNet, Decoder, Encoder) and
fairscale's imports; torchtune and composer stop at imports of torch internals (FakeTensorMode,
DTensor parallel, torchao; torchvision). Each pattern is written here directly (none of those libraries
is imported) and checked against PyTorch 2.13."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- torch.utils._device
@BOTH
def test_utils_device_context_and_decorator_set_the_factories_device(m):
    """litgpt's utils imports ``torch.utils._device`` at import time; its ``set_device`` decorator and
    ``DeviceContext`` make factories create on the given device, restored afterwards."""
    d = importlib.import_module(f"{m.__name__}.utils._device")
    with d.DeviceContext("meta"):
        assert m.zeros(2).device.type == "meta" and m.get_default_device().type == "meta"
    assert m.zeros(2).device.type == "cpu"
    made = d.set_device("meta")(lambda n: m.ones(n))
    assert made(3).device.type == "meta" and tuple(made(3).shape) == (3,)
    assert made.__name__ == "<lambda>" and m.ones(1).device.type == "cpu"
    with pytest.raises(RuntimeError, match="device"):
        d.DeviceContext("nodevice")


# ---------------------------------------------------------------- torch.serialization's names
@BOTH
def test_serialization_location_tag_and_normalize_storage_type(m):
    """litgpt's incremental saver names storages as ``torch.save`` does."""
    s = m.zeros(3).untyped_storage()
    assert m.serialization.location_tag(s) == "cpu"
    assert m.serialization.location_tag(m.zeros(3, device="meta").untyped_storage()) == "meta"
    assert m.serialization.normalize_storage_type(type(s)) is m.UntypedStorage


# ---------------------------------------------------------------- selective activation checkpointing
def _sac(m, policy):
    return functools.partial(m.utils.checkpoint.create_selective_checkpoint_contexts, policy)


@BOTH
def test_selective_checkpoint_reuses_the_saved_outputs_in_the_recompute(m):
    """trl's SFTTrainer imports ``CheckpointPolicy``/``create_selective_checkpoint_contexts`` and passes
    ``context_fn`` to ``checkpoint``. A saved random draw is reused by the recompute (without the rng
    state the plain recompute draws new numbers), and the policy sees each forward call once."""
    C = m.utils.checkpoint
    calls = []

    def policy(ctx, op, *args, **kwargs):
        calls.append(ctx.is_recompute)
        assert isinstance(ctx.op_output, m.Tensor)
        return C.CheckpointPolicy.MUST_SAVE

    x = m.ones(5, requires_grad=True)
    fn = lambda x: x * m.rand_like(x)   # noqa: E731
    out = C.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False, context_fn=_sac(m, policy))
    out.sum().backward()
    assert m.equal(x.grad, out.detach()) and calls == [False, False]
    x.grad = None
    out = C.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=False, context_fn=_sac(m, lambda *a, **k: False))
    out.sum().backward()
    assert not m.equal(x.grad, out.detach())   # recomputed: a new draw


def test_selective_checkpoint_gradients_match_torch():
    """Saving the matmuls and recomputing the rest gives the plain computation's gradients."""
    grads = []
    for m in (torch, tapelab):
        C = m.utils.checkpoint

        def policy(ctx, op, *args, **kwargs):
            return C.CheckpointPolicy.PREFER_SAVE if "mm" in str(op) else C.CheckpointPolicy.PREFER_RECOMPUTE

        m.manual_seed(0)
        x, y = m.randn(4, 4, requires_grad=True), m.randn(4, 4, requires_grad=True)
        fn = lambda x, y: m.nn.functional.dropout(m.sigmoid(m.matmul(m.matmul(x, y), y)) * y, 0.3)   # noqa: E731
        for context_fn in (_sac(m, policy), _sac(m, [m.ops.aten.mm.default])):
            C.checkpoint(fn, x, y, use_reentrant=False, context_fn=context_fn).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for ours, theirs in zip(grads[1], grads[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@BOTH
def test_selective_checkpoint_bad_arguments(m):
    C = m.utils.checkpoint
    assert [p.value for p in C.CheckpointPolicy] == list(range(6))
    with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload"):
        C.create_selective_checkpoint_contexts([m.ops.aten.mm])
    with pytest.raises(TypeError, match="either a function or a list of ops"):
        C.create_selective_checkpoint_contexts(3)
    x = m.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        C.checkpoint(m.sin, x, use_reentrant=True, context_fn=_sac(m, []))
    with pytest.raises(ValueError, match="determinism_check"):
        C.checkpoint(m.sin, x, use_reentrant=False, determinism_check="nope")
    assert m.equal(C.checkpoint(m.sin, x, use_reentrant=False, context_fn=C.noop_context_fn, debug=False), m.sin(x))


# ---------------------------------------------------------------- bfloat16/half attention backward
def _sdpa_grads(m, dt: str, kind: str, arrays: list) -> list:
    d = getattr(m, dt)
    q, k, v = (m.tensor(a).to(d).requires_grad_() for a in arrays[:3])
    L, S = q.shape[-2], k.shape[-2]
    kw = {"causal": dict(is_causal=True), "none": {},
          "bool": dict(attn_mask=m.arange(S).unsqueeze(0) <= m.arange(L).unsqueeze(1) + 1),
          "float": dict(attn_mask=m.linspace(-1, 1, L * S).reshape(L, S).to(d))}[kind]
    out = m.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    out.backward(m.tensor(arrays[3]).to(d))
    return [t.detach().float().numpy() for t in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_reduced_precision_sdpa_gradients_are_torchs_flash_kernel(dt, kind):
    """trl's reward/DPO trainers train a bfloat16 model; PyTorch's CPU flash backward rebuilds the weights
    from the log-sum-exp and rounds them (and the score gradient) to bfloat16 before its GEMMs, so a
    float32 backward rounded once gave q/k/v gradients half of whose elements were off (grad norms 3e-4 apart).
    Bit for bit in bfloat16 on one block of queries."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)]]
    theirs, ours = _sdpa_grads(torch, dt, kind, arrays), _sdpa_grads(tapelab, dt, kind, arrays)
    for name, a, b in zip(["out", "dq", "dk", "dv"], ours, theirs):
        if dt == "bfloat16":
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:   # half: a few elements one ulp apart (float32 sums in another order)
            assert np.mean(a != b) < 0.05, name
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-3, err_msg=name)


def test_reduced_precision_sdpa_gradients_close_over_query_blocks():
    """Past 32 queries the kernel gathers dk/dv block by block in bfloat16; ours stay within a bfloat16
    ulp of torch's (this host's AVX512 kernels round a few elements differently) and far nearer than
    a float32 backward rounded once."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(1, 2, 70, 16), (1, 2, 70, 16), (1, 2, 70, 16), (1, 2, 70, 16)]]
    theirs, ours = _sdpa_grads(torch, "bfloat16", "causal", arrays), _sdpa_grads(tapelab, "bfloat16", "causal", arrays)
    for a, b in zip(ours[1:], theirs[1:]):
        assert np.mean(a != b) < 0.2
        np.testing.assert_allclose(a, b, rtol=2 ** -6, atol=2 ** -6 * np.abs(b).max())


# ---------------------------------------------------------------- fairscale's imports
@BOTH
def test_detach_variable_gives_fresh_leaves_that_keep_requires_grad(m):
    """fairscale's model-parallel checkpoint imports ``torch.utils.checkpoint.detach_variable``."""
    a, b = m.ones(2, requires_grad=True) * 2, m.zeros(3)
    da, db, n = m.utils.checkpoint.detach_variable((a, b, 5))
    assert da.is_leaf and da.requires_grad and da.grad_fn is None and m.equal(da, a) and da is not a
    assert not db.requires_grad and n == 5
    (da * 3).sum().backward()
    assert da.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got Unsupported input type: list"):
        m.utils.checkpoint.detach_variable([a])


@BOTH
def test_cuda_lazy_call_waits_for_an_initialised_cuda(m):
    """fairscale's cuda RNG tracker registers its state setter with ``torch.cuda._lazy_call`` at import."""
    calls = []
    m.cuda._lazy_call(lambda: calls.append(1), seed=True)
    assert calls == ([1] if m.cuda.is_initialized() else [])


# ---------------------------------------------------------------- Lightning's lazy checkpoint loading
_LEGACY = {"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
           "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
           "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
           "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}


@BOTH
def test_legacy_storage_classes_name_their_dtype(m):
    """Checkpoints name a storage by ``torch.FloatStorage`` and its kin; lazy loaders read ``cls().dtype``."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, dt in _LEGACY.items():
            cls = getattr(m, name)
            assert cls().dtype == getattr(m, dt) and issubclass(cls, m.storage.TypedStorage)
        assert m.FloatStorage(3).size() == 3 and m.storage.TypedStorage(dtype=m.int64).size() == 0


@BOTH
def test_a_meta_typed_storage_takes_attributes_and_rebuilds_a_meta_tensor(m):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = m.storage.TypedStorage(dtype=m.bfloat16, device="meta")
    s.archiveinfo = ("storage", m.BFloat16Storage, "0", "cpu", 6)
    t = m._utils._rebuild_tensor_v2(s, 0, (2, 3), (3, 1), False, {}, None)
    assert t.is_meta and tuple(t.shape) == (2, 3) and t.dtype == m.bfloat16 and s.archiveinfo[2] == "0"
    assert m._utils._element_size(m.bfloat16) == 2 and m._utils._element_size(m.complex128) == 16


def _lazy_read(m, path):
    """A lazy checkpoint reader written the way Lightning's ``_lazy_load`` reads (meta tensors first,
    each record's bytes read when asked): the tensors it materialises."""
    import pickle
    import warnings
    reader = m.PyTorchFileReader(str(path))
    metas = []

    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda storage, *rest: metas.append((storage.archiveinfo, rest)) or len(metas) - 1
            return super().find_class(m.__name__ + module[5:] if module.split(".")[0] == "torch" else module, name)

        def persistent_load(self, pid):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                storage = m.storage.TypedStorage(dtype=pid[1]().dtype, device="meta")
            storage.archiveinfo = pid
            return storage

    import io
    index = Reader(io.BytesIO(reader.get_record("data.pkl"))).load()
    out = {}
    for key, i in index.items():
        (_, cls, record, _, numel), rest = metas[i]
        dtype = cls().dtype
        data = reader.get_storage_from_record(f"data/{record}", numel * m._utils._element_size(dtype), m.UntypedStorage)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            typed = m.storage.TypedStorage(wrap_storage=data._typed_storage()._untyped_storage, dtype=dtype, _internal=True)
        out[key] = m._utils._rebuild_tensor_v2(typed, *rest)
    return out


@BOTH
def test_a_lazy_reader_materialises_a_saved_state_dict(m, tmp_path):
    """litgpt's ``load_checkpoint`` reads every checkpoint through Lightning's lazy loader: the storage
    classes, ``TypedStorage(dtype=, device='meta')``, ``PyTorchFileReader.get_storage_from_record``,
    ``Tensor._typed_storage`` and ``torch._utils._rebuild_tensor_v2``."""
    sd = {"w": m.arange(12.).reshape(3, 4), "wt": m.arange(12.).reshape(3, 4).t(), "b": m.tensor([1, 2], dtype=m.int32),
          "h": m.tensor([0.5, 1.5], dtype=m.bfloat16)}
    m.save(sd, tmp_path / "ck.pth")
    got = _lazy_read(m, tmp_path / "ck.pth")
    for k, v in sd.items():
        assert got[k].dtype == v.dtype and m.equal(got[k], v) and got[k].stride() == v.stride(), k


class _Lazy:
    """A tensor-like (``__torch_function__``, not a Tensor) that materialises when an op reaches it."""

    def __init__(self, t):
        self.t, self.shape = t, t.shape

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return func(*[a.t if isinstance(a, _Lazy) else a for a in args], **(kwargs or {}))


@BOTH
def test_load_state_dict_copies_from_a_tensor_like(m):
    """``load_state_dict`` takes tensor-likes (PyTorch's ``is_tensor_like``) and hands them the copy."""
    lin = m.nn.Linear(2, 3)
    lin.load_state_dict({"weight": _Lazy(m.ones(3, 2)), "bias": _Lazy(m.zeros(3))})
    assert lin.weight.tolist() == [[1.0, 1.0]] * 3 and lin.bias.tolist() == [0.0] * 3
    with pytest.raises(RuntimeError, match=r'copying the parameter named "weight", expected torch.Tensor or Tensor-like'):
        lin.load_state_dict({"weight": [[1.0, 1.0]] * 3, "bias": m.zeros(3)})


# ---------------------------------------------------------------- bfloat16/half optimizer steps
REDUCED = pytest.mark.parametrize("dt", ["bfloat16", "float16"])


@REDUCED
@pytest.mark.parametrize("op", ["mul_", "div_"])
def test_in_place_scale_by_a_float_keeps_it_float32(dt, op):
    """``buf.mul_(momentum)`` and ``p.mul_(1 - lr * wd)`` in bfloat16: PyTorch keeps the number a float32
    and rounds the product once (as the out-of-place op already did); numpy's in-place ufunc rounded
    the number to bfloat16 first (a third of the elements off)."""
    a = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    theirs = getattr(torch.tensor(a).to(getattr(torch, dt)), op)(0.9).float().numpy()
    ours = getattr(tapelab.tensor(a).to(getattr(tapelab, dt)), op)(0.9).float().numpy()
    np.testing.assert_array_equal(ours, theirs)


_OPTIMIZERS = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.9, foreach=False)),
               ("Adam", dict(lr=1e-2)), ("AdamW", dict(lr=2e-3, weight_decay=0.02, betas=(0.9, 0.95))),
               ("AdamW", dict(lr=1e-3, amsgrad=True)), ("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True)),
               ("NAdam", dict(lr=1e-2)), ("RAdam", dict(lr=1e-2)), ("Adagrad", dict(lr=0.1))]


@REDUCED
@pytest.mark.parametrize("name,kw", _OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(_OPTIMIZERS)])
def test_reduced_precision_optimizer_steps_are_torchs(dt, name, kw):
    """litgpt's bf16-true Fabric runs keep bfloat16 parameters and AdamW state: four steps, bit for bit."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((64, 33)).astype(np.float32)
    grads = [rng.standard_normal((64, 33)).astype(np.float32) for _ in range(4)]
    out = []
    for m in (torch, tapelab):
        p = m.nn.Parameter(m.tensor(w0).to(getattr(m, dt)))
        opt = getattr(m.optim, name)([p], **kw)
        for g in grads:
            p.grad = m.tensor(g).to(getattr(m, dt))
            opt.step()
        out.append(p.detach().float().numpy())
    np.testing.assert_array_equal(out[1], out[0])


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("case", ["add", "sub", "add_", "sub_int"])
def test_add_a_number_with_alpha_is_one_fused_multiply_add(dt, case):
    """``add(x, 1.7, alpha=-0.3)``: PyTorch's kernel takes the number in the tensor's dtype and computes
    ``fma(number, alpha, x)``; the product in double, rounded into the sum, left a third of the float32
    elements one ulp off (bit for bit over vector-wide arrays; ATen's scalar tail rounds its own way)."""
    a = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    run = {"add": lambda m, x: m.add(x, 1.7, alpha=-0.3), "sub": lambda m, x: x.sub(0.3, alpha=0.7),
           "add_": lambda m, x: x.clone().add_(1.7, alpha=-0.3), "sub_int": lambda m, x: x.sub(2, alpha=0.1)}[case]
    theirs = run(torch, torch.tensor(a).to(getattr(torch, dt))).float().numpy()
    ours = run(tapelab, tapelab.tensor(a).to(getattr(tapelab, dt))).float().numpy()
    np.testing.assert_array_equal(ours, theirs)
    x = tapelab.ones(3, requires_grad=True)
    tapelab.add(x, 2.0, alpha=3.0).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
