"""Gaps found in session 24 (lead) running OpenMMLab's mmengine (its Runner: a model, loops, hooks,
optimizer wrapper with clipping, parameter schedulers, checkpoints, an evaluator) under tapelab; each
pattern written here directly and checked against PyTorch 2.13 (mmengine is not imported)."""
import warnings

import pytest
import torch

import tapelab


def test_conv_transpose_mixin_is_torchs_deprecated_base():
    for m in (torch, tapelab):
        from importlib import import_module
        conv = import_module(m.__name__ + ".nn.modules.conv")
        assert issubclass(conv._ConvTransposeMixin, conv._ConvTransposeNd)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")

            class Up(conv._ConvTransposeMixin):
                pass
            layer = Up(2, 3, (2, 2), (1, 1), (0, 0), (1, 1), True, (0, 0), 1, True, "zeros")
        assert [w.category for w in seen] == [FutureWarning]
        assert "deprecated internal class" in str(seen[0].message)
        assert tuple(layer.weight.shape) == (2, 3, 2, 2)


def test_take_tensors_chunks_by_type_and_bytes_as_torch():
    def chunks(m):
        ts = [m.zeros(10), m.zeros(3, dtype=m.float64), m.zeros(20), m.zeros(5), m.zeros(4, dtype=m.float64),
              m.zeros(30), m.zeros(2, dtype=m.int64)]
        return [[(t.numel(), str(t.dtype).split(".")[-1]) for t in c] for c in m._utils._take_tensors(ts, 100)]
    assert chunks(tapelab) == chunks(torch)


def test_fsdp_api_module_names_the_configuration_records():
    for m in (torch, tapelab):
        from importlib import import_module
        api = import_module(m.__name__ + ".distributed.fsdp.api")
        fsdp = import_module(m.__name__ + ".distributed.fsdp.fully_sharded_data_parallel")
        for name in ("ShardingStrategy", "StateDictType", "FullStateDictConfig", "LocalOptimStateDictConfig",
                     "StateDictSettings", "MixedPrecision", "CPUOffload", "BackwardPrefetch"):
            assert getattr(fsdp, name) is getattr(api, name)
        assert fsdp.FullOptimStateDictConfig(rank0_only=True).offload_to_cpu is True
        assert [s.name for s in api.ShardingStrategy][:4] == ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"]
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        tapelab.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel(tapelab.nn.Linear(2, 2))


def test_a_library_conv_subclass_calls_convnd_with_torchs_signature():
    """Quantization and deformable-convolution libraries subclass ``_ConvNd`` and call it positionally:
    (in, out, kernel, stride, padding, dilation, transposed, output_padding, groups, bias, padding_mode)."""
    shapes = []
    for m in (torch, tapelab):
        from importlib import import_module
        conv = import_module(m.__name__ + ".nn.modules.conv")

        class QuantConv2d(conv._ConvNd):
            def __init__(self, cin, cout, k):
                super().__init__(cin, cout, (k, k), (1, 1), (1, 1), (1, 1), False, (0, 0), 1, True, "zeros")

            def forward(self, x):
                return m.nn.functional.conv2d(x, self.weight, self.bias, self.stride, self.padding)

        class Deconv1d(conv._ConvTransposeNd):
            def __init__(self):
                super().__init__(4, 2, (3,), (2,), (1,), (1,), True, (1,), 1, False, "zeros")

        q, d = QuantConv2d(3, 5, 3), Deconv1d()
        shapes.append((tuple(q.weight.shape), q.transposed, tuple(q(m.ones(1, 3, 6, 6)).shape),
                       tuple(d.weight.shape), d.transposed, d.output_padding, d.bias, repr(q)))
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4, 8), (2, 3, 8, 5)), ((4,), (4,)),
                                    ((3, 4), (4,)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (2, 4, 5)),
                                    ((4,), (2, 4, 5)), ((2, 2, 3, 4), (4,))])
@pytest.mark.parametrize("dtypes", [("double", "float"), ("float", "half"), ("bfloat16", "float")])
def test_matmul_of_two_dtypes_is_refused_in_the_words_of_torchs_kernel_for_the_ranks(shapes, dtypes):
    """jaxtyping/beartype programs print the error of a mistyped call: dot, addmv, mm or bmm words."""
    errors = []
    for m in (torch, tapelab):
        a, b = (getattr(m.zeros(*s), d)() for s, d in zip(shapes, dtypes))
        with pytest.raises(RuntimeError) as info:
            a @ b
        errors.append(str(info.value))
    assert errors[1] == errors[0]


def test_aten_namespace_serves_the_top_level_functions_and_convolution():
    """ptflops keys its table on ``torch.ops.aten.convolution`` and ``_convolution`` at import."""
    import numpy as np
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((1, 2, 6, 6)), rng.standard_normal((3, 2, 3, 3)), rng.standard_normal(3)
    outs = []
    for m in (torch, tapelab):
        X, Wt, B = (m.tensor(a, dtype=m.float32) for a in (x, w, b))
        aten = m.ops.aten
        one = aten.convolution(X, Wt, B, [2, 1], [1, 0], [1, 1], False, [0, 0], 1)
        two = aten._convolution(X, Wt, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True, True)
        up = aten.convolution.default(X, Wt.transpose(0, 1), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1)
        outs.append([t.numpy() for t in (one, two, up)])
    for a, b2 in zip(*outs):
        np.testing.assert_allclose(b2, a, rtol=1e-5, atol=1e-5)
    with pytest.raises(AttributeError):
        tapelab.ops.aten.no_such_op_anywhere


def _outcome(fn):
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return type(e).__name__, str(e)
    return "ok", str(out.dtype).split(".")[-1], out.tolist()


@pytest.mark.parametrize("call", ["a + t", "a - t", "a * t", "a / t", "a @ t", "a ** t", "a // t", "a % t", "t + a",
                                  "t @ a", "t @ a32", "t.copy_(a)", "t.copy_(2.0)", "where(t > 0, t, np.float64(0))",
                                  "embedding(list)", "embedding(array weight)"])
def test_numpy_operands_and_bad_sources_as_torch(call):
    """The sessions' bad-input sweep left these: a numpy array on the left of an operator is Python's refusal
    (only ``/`` computes, through ``reciprocal() * a``), on the right numpy's promotion; ``copy_`` refuses an
    array and takes a number; ``where`` takes a numpy scalar as a number; ``embedding`` names its parameter."""
    import numpy as np
    results = []
    for m in (torch, tapelab):
        t, a = m.tensor([1.0, 2.0, 4.0]), np.array([2.0, 3.0, 5.0])
        fns = {"a + t": lambda: a + t, "a - t": lambda: a - t, "a * t": lambda: a * t, "a / t": lambda: a / t,
               "a @ t": lambda: a @ t, "a ** t": lambda: a ** t, "a // t": lambda: a // t, "a % t": lambda: a % t,
               "t + a": lambda: t + a, "t @ a": lambda: t @ a, "t @ a32": lambda: t @ a.astype(np.float32),
               "t.copy_(a)": lambda: t.copy_(a), "t.copy_(2.0)": lambda: t.copy_(2.0),
               "where(t > 0, t, np.float64(0))": lambda: m.where(t > 1, t, np.float64(0)),
               "embedding(list)": lambda: m.nn.functional.embedding([0, 1], m.ones(3, 2)),
               "embedding(array weight)": lambda: m.nn.functional.embedding(m.tensor([0]), np.ones((3, 2)))}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # numpy's __array_wrap__ notice under torch
            results.append(_outcome(fns[call]))
    if results[0][0] == "TypeError" and results[0][1].startswith("Concatenation"):   # torch's odd words for a + t
        assert results[1][0] == "TypeError"
    else:
        assert results[1] == results[0]
