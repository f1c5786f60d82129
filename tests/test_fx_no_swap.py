"""fx.symbolic_trace through the ``__torch_function__`` protocol: nothing is swapped in any namespace.

A Proxy takes part in the protocol while a trace runs (``overrides.taking_part``): an op that
reaches a Proxy records its public function, and composite public functions check for
tensor-likes at their entry, so each call records as one ``call_function`` node with the public
function as target, whatever name the caller used. Eager tapelab is the oracle for values.
"""
from __future__ import annotations

import inspect
import operator
import pathlib
import re
import threading
import types

import numpy as np
import pytest

import tapelab
import tapelab.fx as fx
from tapelab.fx._public import namespaces
from tapelab.nn.functional import gelu as g

F = tapelab.nn.functional


def _calls(gm) -> list:
    return [(n.op, n.target) for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]


def test_a_function_imported_under_another_name_records_its_public_target():
    gm = fx.symbolic_trace(lambda x: g(x) * 2)
    assert gm.graph.find_nodes(op="call_function")[0].target is F.gelu
    assert "tapelab.nn.functional.gelu(x, " in gm.code      # the guard passes the defaults by keyword
    x = tapelab.randn(3, 4)
    np.testing.assert_allclose(gm(x).numpy(), (F.gelu(x) * 2).numpy(), rtol=1e-6)


_COMPOSITES = {
    "cross_entropy": (F.cross_entropy, lambda a, b: F.cross_entropy(a, b),
                      lambda: (tapelab.randn(4, 5), tapelab.tensor([0, 3, 1, 4]))),
    "normalize": (F.normalize, lambda a: F.normalize(a), lambda: (tapelab.randn(4, 5),)),
    "pad": (F.pad, lambda a: F.pad(a, (1, 2)), lambda: (tapelab.randn(2, 3),)),
    "interpolate": (F.interpolate, lambda a: F.interpolate(a, scale_factor=2, mode="nearest"),
                    lambda: (tapelab.randn(1, 2, 4, 4),)),
}


@pytest.mark.parametrize("name", list(_COMPOSITES))
def test_a_composite_records_as_one_node_with_its_public_target(name):
    fn, f, inputs = _COMPOSITES[name]
    gm = fx.symbolic_trace(f)
    assert _calls(gm) == [("call_function", fn)]
    assert f"tapelab.nn.functional.{name}(" in gm.code
    values = inputs()
    np.testing.assert_allclose(gm(*values).numpy(), f(*values).numpy(), rtol=1e-6)


@pytest.mark.parametrize("fn, call", [
    (tapelab.stack, lambda x, y: tapelab.stack([x, y])),
    (tapelab.einsum, lambda x, y: tapelab.einsum("ij,jk->ik", [x, y])),
    (tapelab.atleast_2d, lambda x, y: tapelab.atleast_2d([x, y])),
    (tapelab.reshape, lambda x, y: tapelab.reshape(x, (y.shape[0], -1))),
], ids=["stack", "einsum", "atleast_2d", "reshape"])
def test_proxies_inside_a_list_argument_are_found(fn, call):
    gm = fx.symbolic_trace(call)
    targets = [t for _, t in _calls(gm)]
    assert targets[-1] is fn and targets.count(fn) == 1      # (reshape's size reads y.shape[0] first)
    x, y = tapelab.randn(2, 2), tapelab.randn(2, 2)
    want, got = call(x, y), gm(x, y)
    want, got = (want, got) if isinstance(want, (list, tuple)) else ([want], [got])
    for w, o in zip(want, got, strict=True):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-6)


def test_tracing_in_two_threads_while_a_third_calls_relu_eagerly():
    relu, stop, errors = tapelab.relu, threading.Event(), []
    x = tapelab.tensor([-1.0, 2.0])

    def eager():
        while not stop.is_set():
            if tapelab.relu is not relu or F.gelu is not g:
                errors.append("a stand-in was visible outside the trace")
            out = tapelab.relu(x)
            if type(out) is not tapelab.Tensor or out.tolist() != [0.0, 2.0]:
                errors.append(f"eager relu gave {out!r}")

    def trace(k):
        try:
            for _ in range(30):
                gm = fx.symbolic_trace(lambda a: F.cross_entropy(tapelab.relu(a) * k, tapelab.tensor([1])))
                assert [t for _, t in _calls(gm)] == [tapelab.relu, operator.mul, F.cross_entropy]
        except Exception as e:   # noqa: BLE001  (reported below, from the main thread)
            errors.append(repr(e))

    third = threading.Thread(target=eager)
    third.start()
    tracers = [threading.Thread(target=trace, args=(k,)) for k in (2.0, 3.0)]
    for t in tracers:
        t.start()
    for t in tracers:
        t.join()
    stop.set()
    third.join()
    assert errors == []
    assert tapelab.base.dispatch_state.STATE.functions is None     # the protocol's hook is gone again


def test_fx_wrap_as_a_decorator_is_a_permanent_explicit_wrapper():
    gm = fx.symbolic_trace(lambda x: _scaled_max(x) + 1)
    assert _calls(gm)[0] == ("call_function", _scaled_max)
    assert _scaled_max.__wrapped__.__name__ == "_scaled_max"
    x = tapelab.tensor([1.0, -4.0])
    assert gm(x).tolist() == (_scaled_max(x) + 1).tolist() == [1.25, 0.0]


@fx.wrap
def _scaled_max(x):
    return x / x.abs().max() if x.numel() else x      # control flow: traced through, it would fail


def test_wrap_by_name_needs_the_function_defined_above_it():
    namespace = {"__name__": "m"}
    with pytest.raises(NameError, match="defines no function 'later' above this call"):
        exec("import tapelab\ntapelab.fx.wrap('later')\n", namespace)
    exec("import tapelab\ndef f(x):\n    return x\ntapelab.fx.wrap('f')\n", namespace)
    assert namespace["f"].__wrapped__.__name__ == "f"      # bound once, at module scope


def test_wrap_of_a_builtin_by_name_records_the_builtin():
    namespace = {"__name__": "m"}
    exec("import tapelab\ntapelab.fx.wrap('len')\ndef f(x):\n    return x * len(x)\n", namespace)
    gm = fx.symbolic_trace(namespace["f"])
    assert _calls(gm) == [("call_function", len), ("call_function", operator.mul)]
    assert gm(tapelab.ones(3)).tolist() == [3.0, 3.0, 3.0]


def test_autowrap_functions_must_record_by_themselves():
    with pytest.raises(TypeError, match="decorate it with @tapelab.fx.wrap"):
        fx.Tracer(autowrap_functions=(lambda x: x,))
    fx.Tracer(autowrap_functions=(_scaled_max, tapelab.relu))


def test_an_op_reached_with_the_protocol_off_names_the_op():
    def f(x):
        with tapelab.overrides.DisableTorchFunction():
            return tapelab.exp(x)
    with pytest.raises(fx.TraceError, match="op 'exp' received a Proxy"):
        fx.symbolic_trace(f)
    assert tapelab.base.dispatch_state.STATE.functions is None


# ---------------------------------------------------------------- every public function records as one node
# functions that make no tensor from tensor arguments (settings, RNG state, factories from data): not
# calls a graph records, as PyTorch's ``get_ignored_functions``
_NOT_TENSOR_FUNCTIONS = frozenset("""
are_deterministic_algorithms_enabled asarray autocast_decrement_nesting autocast_increment_nesting broadcast_shapes
can_cast clear_autocast_cache compile fork from_numpy frombuffer get_autocast_cpu_dtype get_autocast_gpu_dtype
get_default_device get_default_dtype get_deterministic_debug_mode get_device get_device_module get_autocast_dtype is_autocast_enabled get_float32_matmul_precision
get_num_interop_threads get_num_threads get_rng_state init_num_threads initial_seed install_aliases
install_methods is_anomaly_check_nan_enabled is_anomaly_enabled is_autocast_cache_enabled is_autocast_cpu_enabled
is_deterministic_algorithms_warn_only_enabled is_distributed is_grad_enabled is_inference_mode_enabled is_storage
is_tensor is_vulkan_available is_warn_always_enabled load manual_seed promote_types result_type save seed
set_anomaly_enabled set_autocast_cache_enabled set_autocast_cpu_dtype set_autocast_cpu_enabled
set_autocast_dtype set_autocast_enabled set_autocast_gpu_dtype set_default_device set_default_dtype set_default_tensor_type
set_deterministic_debug_mode set_flush_denormal set_float32_matmul_precision set_num_interop_threads
set_num_threads set_printoptions set_rng_state set_warn_always sparse_coo_tensor sparse_compressed_tensor
sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor tensor to typename
uninstall_aliases use_deterministic_algorithms vmap wait compiled_with_cxx11_abi thread_safe_generator
sym_constrain_range sym_constrain_range_for_size sym_float sym_fresh_size sym_int sym_ite sym_max sym_min sym_not
sym_sqrt sym_sum
""".split())


def _public_functions():
    for prefix, ns in namespaces():
        for name, fn in sorted(vars(ns).items()):
            if (not name.startswith("_") and callable(fn) and not isinstance(fn, (type, types.ModuleType))
                    and name not in _NOT_TENSOR_FUNCTIONS):
                yield f"{prefix}.{name}", fn


def _guarded(fn) -> bool:
    """Whether ``fn``'s body starts with the tensor-like check (composites; generated ones included)."""
    code = getattr(fn, "__code__", None)
    return code is not None and "has_tensor_like" in code.co_names


def _records_as_one_node(fn) -> bool:
    """Trace ``fn`` on Proxies (its required positional parameters, then 1s): one node, ``fn`` its target."""
    try:
        params = inspect.signature(fn).parameters.values()
        n = sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    except (TypeError, ValueError):
        n = 1
    n = max(n, 1)

    def f(x, y, z):
        return fn(*((x, y, z) + (1,) * n)[:n])
    gm = fx.symbolic_trace(f)
    return _calls(gm) == [("call_function", fn)]


def test_every_public_function_checks_for_proxies_or_is_one_op():
    """New public functions stay honest: each is a guarded composite, or one op whose call records itself."""
    unguarded = [(name, fn) for name, fn in _public_functions() if not _guarded(fn)]
    bad = []
    for name, fn in unguarded:
        try:
            ok = _records_as_one_node(fn)
        except Exception as e:   # noqa: BLE001  (collected: the assertion names every offender)
            ok, name = False, f"{name} ({type(e).__name__}: {str(e)[:80]})"
        if not ok:
            bad.append(name)
    assert bad == [], ("these public functions neither check for tensor-likes at their entry "
                       "(`if _DISPATCH.functions is not None and has_tensor_like(...)`) nor record as one op")


# ---------------------------------------------------------------- no namespace writes in fx
# the writes fx makes, each into an object it owns: GraphModule's own attributes and the submodules and
# tensors it copies from the root (as PyTorch's GraphModule does), the ``prims`` namespace's own cache,
# and a tensor constant stored on the traced root (PyTorch: ``setattr(root, name, value)``)
_OWN_WRITES = {
    ("graph_module.py", "setattr(to_module, item, t)"),
    ("graph_module.py", "setattr(module, field, value)"),
    ("graph_module.py", 'self.__dict__["training"] = root.training'),
    ("graph_module.py", 'self.__dict__["meta"] = {}'),
    ("graph_module.py", 'return self.__dict__["_graph"]'),
    ("graph_module.py", 'self.__dict__["_graph"] = g'),
    ("graph_module.py", 'return self.__dict__["_code"]'),
    ("graph_module.py", 'self.__dict__["_code"] = src'),
    ("prims.py", "setattr(self, name, prim)"),
    ("_symbolic_trace.py", "self.root.__dict__[name] = a"),
    # ``wrap("name")`` / ``wrap(f)``: binds the wrapper in the calling module once, at module scope, at its request
    ("_symbolic_trace.py", "frame.f_globals[name] = wrapper = _recording(fn)"),
}


def test_fx_writes_into_no_namespace():
    root = pathlib.Path(fx.__file__).parent
    hits = {(p.name, line.strip()) for p in root.rglob("*.py") for line in p.read_text().splitlines()
            if re.search(r"setattr\(|__dict__\[|globals\(\)\[|f_globals\[", line)}
    assert hits <= _OWN_WRITES, sorted(hits - _OWN_WRITES)
