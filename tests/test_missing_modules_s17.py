"""PyTorch modules researchers' programs import that tapelab lacked: ``torch.signal.windows``,
``torch.nn.attention.bias``, ``torch.mps`` / ``torch.xpu`` (as PyTorch's CPU build answers),
``torch.distributed.elastic.multiprocessing.errors`` (torchrun's ``@record``) and ``torch.nested``.
Each behaviour is compared with real torch."""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest
import torch

import tapelab


def _outcome(f):
    """What ``f()`` returns, or its exception's type name and text (the library's own name made neutral)."""
    try:
        out = f()
    except BaseException as e:   # noqa: BLE001  (AssertionError/NotImplementedError are part of the contract)
        return type(e).__name__, str(e).replace("tapelab", "torch")
    return "ok", out if out is None or isinstance(out, (bool, int, str, list, tuple, float)) else type(out).__name__


# ---------------------------------------------------------------- torch.signal.windows
_WINDOWS = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
            "hamming", "hann", "kaiser", "nuttall"]
_EXTRA = {"general_cosine": {"a": [0.46, 0.23, 0.31]}}


@pytest.mark.parametrize("name", _WINDOWS)
def test_signal_windows_match_torch(name):
    import tapelab.signal.windows as tw
    import torch.signal.windows as rw
    for M in (0, 1, 2, 3, 8, 17):
        for sym in (True, False):
            # float32 within a few ulp: torch's vectorised float32 sqrt/exp/cos round differently from
            # numpy's (kaiser's sqrt(beta^2 - k^2) shows it most)
            for dt, tol in (("float32", 2e-6), ("float64", 1e-15)):
                kw = dict(_EXTRA.get(name, {}), sym=sym)
                want = getattr(rw, name)(M, dtype=getattr(torch, dt), **kw)
                got = getattr(tw, name)(M, dtype=getattr(tapelab, dt), **kw)
                assert str(got.dtype).split(".")[1] == dt and tuple(got.shape) == tuple(want.shape)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, err_msg=f"{name} {M} {sym}")
    want, got = getattr(rw, name)(6, requires_grad=True, **_EXTRA.get(name, {})), \
        getattr(tw, name)(6, requires_grad=True, **_EXTRA.get(name, {}))
    assert (got.requires_grad, got.is_leaf, got.dtype == tapelab.float32) == (want.requires_grad, want.is_leaf, True)


@pytest.mark.parametrize("name, kw", [("kaiser", {"beta": 5.0}), ("gaussian", {"std": 2.5}), ("exponential", {"tau": 3.0}),
                                      ("exponential", {"tau": 2.0, "center": 1.5, "sym": False}),
                                      ("general_hamming", {"alpha": 0.6})])
def test_signal_window_parameters(name, kw):
    import tapelab.signal.windows as tw
    import torch.signal.windows as rw
    np.testing.assert_allclose(getattr(tw, name)(9, dtype=tapelab.float64, **kw).numpy(),
                               getattr(rw, name)(9, dtype=torch.float64, **kw).numpy(), rtol=1e-14, atol=1e-15)


def test_signal_windows_equal_numpys_symmetric_windows():
    """torch's symmetric windows are SciPy's, and numpy's ``hanning``/``kaiser``/... are the same windows."""
    import tapelab.signal.windows as tw
    for ours, theirs in ((tw.bartlett, np.bartlett), (tw.blackman, np.blackman), (tw.hann, np.hanning),
                         (tw.hamming, np.hamming), (lambda M, **kw: tw.kaiser(M, beta=4.0, **kw),
                                                    lambda M: np.kaiser(M, 4.0))):
        for M in (1, 2, 7, 12):
            np.testing.assert_allclose(ours(M, dtype=tapelab.float64).numpy(), theirs(M), atol=1e-12)


def test_signal_window_errors_match_torch():
    import tapelab.signal.windows as tw
    import torch.signal.windows as rw
    cases = [lambda L, m: m.hann(-1), lambda L, m: m.hann(3, dtype=L.int32), lambda L, m: m.hann(3, dtype=L.float16),
             lambda L, m: m.hann(3, layout=L.sparse_coo), lambda L, m: m.kaiser(3, beta=-1),
             lambda L, m: m.gaussian(3, std=0), lambda L, m: m.exponential(3, tau=0),
             lambda L, m: m.exponential(3, center=1.0), lambda L, m: m.general_cosine(3, a=[]),
             lambda L, m: m.general_cosine(3, a=3), lambda L, m: m.blackman(-2), lambda L, m: m.bartlett(2, dtype=L.int64)]
    for case in cases:
        assert _outcome(lambda: case(tapelab, tw)) == _outcome(lambda: case(torch, rw))


# ---------------------------------------------------------------- torch.nn.attention.bias
@pytest.mark.parametrize("variant", ["causal_upper_left", "causal_lower_right"])
@pytest.mark.parametrize("L, S", [(4, 4), (3, 6), (1, 5), (6, 3)])
def test_causal_bias_attention_and_gradients_match_torch(variant, L, S):
    rng = np.random.default_rng(L * 10 + S)
    arrays = [rng.standard_normal((2, 3, n, 8)).astype(np.float32) for n in (L, S, S)]
    results = []
    for lib in (torch, tapelab):
        import importlib
        bias = importlib.import_module(lib.__name__ + ".nn.attention.bias")
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            b = getattr(bias, variant)(L, S)
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=b)
        out.square().sum().backward()
        results.append((out.detach().numpy(), [t.grad.numpy() for t in (q, k, v)], tuple(b.shape),
                        b._materialize().numpy(), [str(w.message) for w in caught], type(b).__name__,
                        isinstance(b, lib.Tensor), int(b.variant), str(b.variant)))
    (w_out, w_grads, *w_rest), (g_out, g_grads, *g_rest) = results
    np.testing.assert_allclose(g_out, w_out, rtol=1e-5, atol=1e-6, equal_nan=True)
    for g, w in zip(g_grads, w_grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert g_rest[0] == w_rest[0]
    np.testing.assert_array_equal(g_rest[1], w_rest[1])
    assert g_rest[2:] == w_rest[2:]


def test_causal_bias_positional_mask_scale_and_errors():
    from tapelab.nn.attention import bias as tb
    from torch.nn.attention import bias as rb
    a = [np.random.default_rng(i).standard_normal((1, 2, n, 4)).astype(np.float32) for i, n in enumerate((3, 5, 5))]
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, a), rb.causal_lower_right(3, 5),
                                                            scale=0.3)
    got = tapelab.nn.functional.scaled_dot_product_attention(*map(tapelab.tensor, a), tb.causal_lower_right(3, 5),
                                                             scale=0.3)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    for lib, m in ((torch, rb), (tapelab, tb)):
        q = lib.zeros(1, 1, 2, 4)
        assert _outcome(lambda: lib.nn.functional.scaled_dot_product_attention(q, q, q, m.causal_upper_left(2, 2),
                                                                                is_causal=True)) == \
            ("ValueError", "CausalBias should not be used with causal=True")
        assert _outcome(lambda: m.causal_lower_right(2, 3, 4)) == ("AssertionError",
                                                                   "causal_lower_right only supports 2D tensors")
        assert _outcome(lambda: m.CausalBias(1, 2, 2)) == ("AssertionError", "variant must be a CausalVariant, got int")
    assert repr(tb.causal_upper_left(2, 3)) == repr(rb.causal_upper_left(2, 3))


# ---------------------------------------------------------------- torch.mps, torch.xpu, torch.backends.mps
_MPS_CALLS = {
    "is_available": (), "device_count": (), "synchronize": (), "empty_cache": (), "manual_seed": (0,), "seed": (),
    "get_rng_state": (), "current_allocated_memory": (), "driver_allocated_memory": (), "recommended_max_memory": (),
    "set_per_process_memory_fraction": (0.5,), "compile_shader": ("",), "load_metallib": ("x",), "Event": (),
}
_XPU_CALLS = {
    "is_available": (), "device_count": (), "is_initialized": (), "init": (), "current_device": (), "set_device": (0,),
    "synchronize": (), "empty_cache": (), "manual_seed": (0,), "manual_seed_all": (3,), "seed": (), "seed_all": (),
    "initial_seed": (), "get_rng_state": (), "get_rng_state_all": (), "memory_allocated": (),
    "max_memory_allocated": (), "memory_reserved": (), "max_memory_reserved": (), "memory_snapshot": (),
    "memory_stats_as_nested_dict": (), "get_device_name": (), "get_device_properties": (), "mem_get_info": (),
    "get_arch_list": (), "get_gencode_flags": (), "is_bf16_supported": (), "is_tf32_supported": (),
    "get_per_process_memory_fraction": (), "current_stream": (), "Stream": (), "Event": (), "set_stream": (None,),
}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")   # torch's mps.Event.__del__
@pytest.mark.parametrize("module, calls", [("mps", _MPS_CALLS), ("xpu", _XPU_CALLS)])
def test_device_modules_answer_as_torchs_cpu_build(module, calls):
    for name, args in calls.items():
        want = _outcome(lambda: getattr(getattr(torch, module), name)(*args))
        assert _outcome(lambda: getattr(getattr(tapelab, module), name)(*args)) == want, name
    assert set(calls) - {"Event", "Stream"} <= set(getattr(tapelab, module).__all__)


def test_xpu_contexts_and_seeds_as_torchs():
    for lib in (torch, tapelab):
        assert _outcome(lambda: lib.xpu.manual_seed("a")) == ("ValueError", "invalid literal for int() with base 10: 'a'")
        assert _outcome(lambda: lib.xpu.device(0).__enter__()) == ("NotImplementedError",
                                                                    "PyTorch was compiled without XPU support")
        assert _outcome(lambda: lib.xpu.stream(None).__enter__()) == ("ok", None)
        assert _outcome(lambda: lib.xpu.set_rng_state(lib.zeros(4, dtype=lib.uint8))) == ("ok", None)
        assert dict(lib.xpu.memory_stats()) == {} and lib.xpu.default_generators == ()


def test_backends_mps_and_mps_profiler_as_torchs():
    for name, args in [("is_available", ()), ("is_built", ()), ("is_macos13_or_newer", ()),
                       ("is_macos_or_newer", (14, 0))]:
        assert _outcome(lambda: getattr(tapelab.backends.mps, name)(*args)) == \
            _outcome(lambda: getattr(torch.backends.mps, name)(*args)), name
    for name in ("start", "stop"):
        assert _outcome(getattr(tapelab.mps.profiler, name)) == _outcome(getattr(torch.mps.profiler, name))
    assert _outcome(lambda: tapelab.mps.profiler.profile().__enter__()) == \
        _outcome(lambda: torch.mps.profiler.profile().__enter__())


# ---------------------------------------------------------------- torch.distributed.elastic ... errors.record
def _record_run(lib, tmp, monkeypatch):
    """What a torchrun entry point decorated with ``@record`` does on success, ``sys.exit(0)``, an
    exception and a failed child, with the error file it leaves each time."""
    import importlib
    errors = importlib.import_module(lib.__name__ + ".distributed.elastic.multiprocessing.errors")
    child = tmp / "child.json"
    child.write_text(json.dumps({"message": {"message": "RuntimeError: boom",
                                             "extraInfo": {"py_callstack": "tb", "timestamp": "17"}}}))
    mine = tmp / f"{lib.__name__}.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(mine))

    @errors.record
    def main(x):
        """The entry point."""
        if x == "exit0":
            sys.exit(0)
        if x == "exit3":
            sys.exit(3)
        if x == "raise":
            raise ValueError("bad batch size 3")
        if x == "child":
            raise errors.ChildFailedError("train.py", {0: errors.ProcessFailure(0, 123, 1, str(child)),
                                                      1: errors.ProcessFailure(1, 124, -9, "/nonexistent")})
        return x * 2

    out = {"ok": main(21), "name": (main.__name__, main.__doc__), "exit0": main("exit0")}
    for what in ("exit3", "raise", "child"):
        try:
            main(what)
        except BaseException as e:   # noqa: BLE001
            data = json.loads(mine.read_text()) if mine.exists() else None
            if data and isinstance(data["message"], dict) and "py_callstack" in data["message"]["extraInfo"]:
                info = data["message"]["extraInfo"]
                info["py_callstack"] = info["py_callstack"].strip().splitlines()[-1]
                info["timestamp"] = info["timestamp"].isdigit()
            lines = [line for line in str(e).splitlines() if "time" not in line and "host" not in line]
            out[what] = [type(e).__name__, data, lines]
            mine.unlink(missing_ok=True)
    failure = errors.ProcessFailure(2, 7, -15, "/nonexistent")
    out["signal"] = (failure.message, failure.signal_name(), failure.error_file)
    return out


def test_elastic_record_writes_torchs_error_file(tmp_path, monkeypatch):
    want, got = (_record_run(lib, tmp_path, monkeypatch) for lib in (torch, tapelab))
    assert got == want
    assert want["ok"] == 42 and want["raise"][1]["message"]["message"] == "ValueError: bad batch size 3"
    assert want["child"][1]["message"]["errorCode"] == 1


def test_new_module_paths_import_under_aliases():
    """The import statements programs write, under ``install_aliases()``."""
    from tapelab.nn.attention import bias
    with tapelab.install_aliases():
        import torch as tt
        import torch.mps.profiler  # noqa: F401
        import torch.signal.windows
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record  # noqa: F401
        from torch.nn.attention.bias import CausalVariant, causal_lower_right
        from torch.signal.windows import hann
        assert tt is tapelab and torch.signal.windows.hann is hann and CausalVariant is bias.CausalVariant
        assert hann(3).tolist() == [0.0, 1.0, 0.0] and causal_lower_right(1, 2).variant.name == "LOWER_RIGHT"
        assert (tt.mps.is_available(), tt.backends.mps.is_available(), tt.xpu.is_available(),
                tt.xpu.device_count()) == (False, False, False, 0)
        assert record.__module__ == "tapelab.distributed.elastic.multiprocessing.errors"
