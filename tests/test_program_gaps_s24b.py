"""Gaps found in session 24 (helper s24b) running spiking, scientific, RL and imaging libraries unchanged
under ``install_aliases()``: snntorch, norse, spikingjelly, normflows (RealNVP, neural splines, Glow,
residual, planar, MAF), tianshou (DQN, Reinforce, A2C, PPO on CartPole), sbi (NPE/NLE/NRE), torchio
and tensordict's imports; each pattern written here directly and checked against PyTorch 2.13."""
import pytest
import torch

import tapelab


@pytest.mark.parametrize("name", ["Node", "Value", "Block", "Type"])
def test_torchscript_ir_types_import_and_refuse_construction(name):
    """snntorch's loss module runs ``from torch._C import Value`` at import; the IR types are the same
    objects at ``torch.<name>`` and have no constructor."""
    for m in (torch, tapelab):
        cls = getattr(m._C, name)
        assert getattr(m, name) is cls and cls.__name__ == name and cls.__module__ == "torch"
        with pytest.raises(TypeError, match=f"torch._C.{name}: No constructor defined"):
            cls()


def test_torchscript_graph_type_is_an_empty_graph():
    """``torch.Graph`` (ONNX symbolics annotate ``g: torch._C.Graph``) makes an empty graph."""
    for m in (torch, tapelab):
        g = m._C.Graph()
        assert m.Graph is m._C.Graph and type(g).__module__ == "torch"
        assert str(g) == "graph():\n  return ()\n"
        assert list(g.nodes()) == list(g.inputs()) == list(g.outputs()) == []


_BUILTIN_NODE_FUNCTIONS = [f"_{kind}_{fn}" for kind in ("tuple", "list", "dict", "namedtuple", "ordereddict",
                                                         "defaultdict", "deque")
                           for fn in ("flatten", "unflatten", "flatten_with_keys")]


def _tree_roundtrip(m, name):
    """norse's pattern: a namedtuple state class registered by hand with the built-in namedtuple functions,
    then mapped over (``tree_map_only``) and flattened with key paths."""
    import collections
    pt = m.utils._pytree
    State = collections.namedtuple(f"State{name}", "v i")
    Sub = type(f"Sub{name}", (State,), {})
    pt.register_pytree_node(Sub, pt._namedtuple_flatten, pt._namedtuple_unflatten,
                            flatten_with_keys_fn=pt._namedtuple_flatten_with_keys)
    tree = {"a": Sub(m.ones(2), [m.zeros(1), 3]), "b": State(m.ones(1), collections.deque([m.ones(1)], maxlen=4))}
    mapped = pt.tree_map_only(m.Tensor, lambda t: t + 1, tree)
    leaves, spec = pt.tree_flatten(mapped)
    paths = [pt.keystr(p) for p, _ in pt.tree_flatten_with_path(tree)[0]]
    rebuilt = pt.tree_unflatten(leaves, spec)
    return ([x.tolist() if isinstance(x, m.Tensor) else x for x in leaves], paths, type(rebuilt["a"]) is Sub,
            type(rebuilt["b"]) is State, rebuilt["b"].i.maxlen, collections.namedtuple in pt.SUPPORTED_NODES)


def test_pytree_builtin_node_functions_under_pytorchs_names():
    """``torch.utils._pytree._namedtuple_flatten`` and its siblings (norse imports them to register its
    state tuples) exist with PyTorch's results, and a namedtuple class registered by hand with them
    flattens, maps and rebuilds as under PyTorch."""
    import collections
    for name in _BUILTIN_NODE_FUNCTIONS:
        if hasattr(torch.utils._pytree, name):
            assert callable(getattr(tapelab.utils._pytree, name)), name
    P = collections.namedtuple("P", "a b")
    d = collections.defaultdict(list, {"x": 1})
    for value, kind in [((1, 2), "tuple"), ([1, 2], "list"), ({"k": 1}, "dict"), (P(1, 2), "namedtuple"),
                        (collections.OrderedDict(k=1), "ordereddict"), (d, "defaultdict"),
                        (collections.deque([1, 2], maxlen=3), "deque")]:
        got = [getattr(m.utils._pytree, f"_{kind}_flatten")(value) for m in (torch, tapelab)]
        assert got[0] == got[1], kind
        keyed = [getattr(m.utils._pytree, f"_{kind}_flatten_with_keys")(value) for m in (torch, tapelab)]
        assert [str(k) for k, _ in keyed[0][0]] == [str(k) for k, _ in keyed[1][0]] and keyed[0][1] == keyed[1][1]
        rebuilt = getattr(tapelab.utils._pytree, f"_{kind}_unflatten")(*got[1])
        assert type(rebuilt) is type(value) and rebuilt == value, kind
    assert _tree_roundtrip(torch, "T") == _tree_roundtrip(tapelab, "L")


def _activation_checkpointing(m):
    """A model whose blocks are wrapped by ``apply_activation_checkpointing``: names, keys, gradients, a
    state dict saved before wrapping loaded after, the reentrant form with keyword arguments, a custom
    ``checkpoint_fn`` with its keywords, offloading and a size-based policy."""
    import functools
    import importlib
    cw = importlib.import_module(m.__name__ + ".distributed.algorithms._checkpoint.checkpoint_wrapper")
    wrap = importlib.import_module(m.__name__ + ".distributed.fsdp.wrap")
    m.manual_seed(0)

    class Block(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.norm = m.nn.Linear(4, 4), m.nn.LayerNorm(4)

        def forward(self, x, scale=1.0):
            return self.norm(m.tanh(self.lin(x))) * scale

    model = m.nn.Sequential(m.nn.Linear(3, 4), Block(), Block(), m.nn.Linear(4, 2))
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    cw.apply_activation_checkpointing(model, check_fn=lambda mod: isinstance(mod, Block))
    model(m.randn(5, 3, requires_grad=True)).sum().backward()
    grads = [round(p.grad.sum().item(), 4) + 0.0 for p in model.parameters()]
    model.load_state_dict(saved)
    reentrant = cw.checkpoint_wrapper(Block(), checkpoint_impl=cw.CheckpointImpl.REENTRANT)
    x = m.randn(2, 4, requires_grad=True)
    reentrant(x, scale=2.0).sum().backward()
    custom = cw.checkpoint_wrapper(m.nn.Linear(2, 2), checkpoint_fn=lambda f, *a, extra: f(*a) * extra, extra=3.0)
    offload = cw.offload_wrapper(m.nn.Linear(4, 1))
    offload(m.ones(2, 4)).sum().backward()
    nested = m.nn.Sequential(m.nn.Linear(3, 3), m.nn.Sequential(m.nn.Linear(3, 3), m.nn.Linear(3, 3)))
    cw.apply_activation_checkpointing(nested, auto_wrap_policy=functools.partial(
        wrap.size_based_auto_wrap_policy, min_num_params=10))
    return ([n for n, _ in model.named_parameters()], list(model.state_dict()), [type(c).__name__ for c in model],
            grads, round(model[1].lin.weight.sum().item(), 5), [n for n, _ in model[1].named_parameters()],
            round(x.grad.sum().item(), 4), custom.checkpoint_fn.keywords, round(custom(m.ones(1, 2)).sum().item(), 5),
            offload.weight.grad.tolist(), [type(c).__name__ for c in nested.modules()])


def test_checkpoint_wrapper_and_apply_activation_checkpointing():
    """spikingjelly's ``memopt`` imports ``checkpoint_wrapper`` from
    ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper`` (its whole model zoo failed to
    import); the wrappers keep the unwrapped module's keys and compute what PyTorch's do."""
    assert _activation_checkpointing(torch) == _activation_checkpointing(tapelab)


def test_activation_wrapper_is_abstract():
    import importlib
    for m in (torch, tapelab):
        cw = importlib.import_module(m.__name__ + ".distributed.algorithms._checkpoint.checkpoint_wrapper")
        with pytest.raises(TypeError, match="abstract class ActivationWrapper"):
            cw.ActivationWrapper(m.nn.Linear(1, 1))


def test_vision_internally_replaced_utils_loads_through_the_hub(tmp_path):
    """spikingjelly's ``spiking_resnet`` falls back to ``from torchvision._internally_replaced_utils import
    load_state_dict_from_url``; it is the hub's function (torchvision itself is not installed beside the
    oracle, so the check is against ``torch.hub``'s loader reading the same file)."""
    from tapelab.vision._internally_replaced_utils import load_state_dict_from_url
    assert load_state_dict_from_url is tapelab.hub.load_state_dict_from_url
    torch.save({"w": torch.arange(3.0)}, tmp_path / "w.pth")
    url = (tmp_path / "w.pth").as_uri()
    got = load_state_dict_from_url(url, model_dir=str(tmp_path / "tl"), progress=False)
    want = torch.hub.load_state_dict_from_url(url, model_dir=str(tmp_path / "pt"), progress=False)
    assert got["w"].tolist() == want["w"].tolist() == [0.0, 1.0, 2.0]


_NS_SEQ = iter(range(10 ** 6))


def _device_kernels(m):
    """spikingjelly's op registration: a ``triton_op`` whose body runs anywhere, a ``Library`` fragment
    giving it a CPU and a CUDA kernel (the CUDA one registered last), ``register_autograd``, then an
    ``AutogradCPU`` kernel that replaces the backward on cpu; ``custom_op.register_kernel`` and
    ``library.impl`` with device types."""
    ns = f"s24b_{m.__name__}_{next(_NS_SEQ)}"
    lib = m.library.Library(ns, "FRAGMENT")
    T = m.Tensor

    def scale(x: T, s: float) -> T:
        return x * s

    def twice(x: T) -> T:
        return x * 2

    op = m.library.triton_op(f"{ns}::scale", scale, mutates_args=())
    ops = getattr(m.ops, ns)
    res = [ops.scale.default(m.ones(2), 2.0).tolist()]
    lib.impl("scale", lambda x, s: x * s + 1, "CPU")
    lib.impl("scale", lambda x, s: x * s + 100, "CUDA")
    res += [ops.scale.default(m.ones(2), 2.0).tolist(), op(m.ones(2), 2.0).tolist()]

    def setup_context(ctx, inputs, output):
        ctx.s = inputs[1]

    m.library.register_autograd(f"{ns}::scale", lambda ctx, g: (g * 10, None), setup_context=setup_context)
    for _ in range(2):
        x = m.ones(2, requires_grad=True)
        y = op(x, 2.0)
        y.sum().backward()
        res.append((y.tolist(), x.grad.tolist()))
        lib.impl("scale", lambda x, s: x * s * 3, "AutogradCPU")
    with m.no_grad():
        res.append(op(m.ones(2), 2.0).tolist())
    c = m.library.custom_op(f"{ns}::twice", twice, mutates_args=())
    c.register_kernel("cpu", lambda x: x * 5)
    res.append(c(m.ones(1)).tolist())
    m.library.define(f"{ns}::neg", "(Tensor x) -> Tensor")
    m.library.impl(f"{ns}::neg", ["cuda"], lambda x: -x * 100)
    with pytest.raises(NotImplementedError, match=f"Could not run '{ns}::neg' with arguments from the 'CPU' backend"):
        ops.neg(m.ones(1))
    m.library.impl(f"{ns}::neg", "cpu", lambda x: -x)
    return res + [ops.neg(m.ones(1)).tolist()]


def test_library_kernels_are_chosen_by_dispatch_key_and_device():
    """A kernel registered for ``"CUDA"`` never runs on cpu tensors (tapelab kept the last kernel given,
    whatever its key, and spikingjelly's cpu neurons ran its CUDA launcher); an ``AutogradCPU`` kernel
    runs in place of the registered backward; ``torch.ops.ns.name.default`` reaches a custom op."""
    assert _device_kernels(torch) == _device_kernels(tapelab)


def test_unset_fake_temporarily_yields_the_absent_fake_mode():
    """spikingjelly's op dispatch imports ``unset_fake_temporarily``; outside tracing no fake mode is set."""
    from tapelab._subclasses import fake_tensor as tl
    from torch._subclasses import fake_tensor as pt
    for f in (pt, tl):
        with f.unset_fake_temporarily() as mode:
            assert mode is None
        assert f.maybe_get_fake_mode(torch.ones(1) if f is pt else tapelab.ones(1)) is None


_DEPRECATED_LINALG = {
    "lu": "m.lu(A)", "Tensor.lu": "A.lu()", "qr": "m.qr(A)", "lu_solve": "m.lu_solve(B, *m.linalg.lu_factor(A))",
    "triangular_solve": "m.triangular_solve(B, A)", "chain_matmul": "m.chain_matmul(A, A)",
    "cholesky": "m.cholesky(A @ A.mT)",
}


def _deprecation_warnings(m, call: str) -> list:
    import warnings
    A, B = m.eye(3) * 2 + m.ones(3, 3), m.ones(3, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            eval(call, {"m": m, "A": A, "B": B})
    return [(w.category.__name__, str(w.message).split(" (Triggered internally")[0]) for w in caught]


@pytest.mark.parametrize("name", sorted(_DEPRECATED_LINALG))
def test_deprecated_linalg_names_warn_once_in_pytorchs_words(name, monkeypatch):
    """normflows' invertible 1x1 convolution calls ``Q.lu()``: PyTorch warns (once per process, ATen's
    TORCH_WARN_ONCE) that ``torch.lu`` is deprecated; tapelab said nothing for lu, qr, lu_solve and
    triangular_solve and warned at every call for chain_matmul and cholesky. PyTorch's warnings are
    read in a fresh process, where its once has not been spent."""
    import subprocess
    import sys
    from tapelab.ops import _util
    monkeypatch.setattr(_util, "_warned", set())
    code = (f"import torch, sys; sys.path.insert(0, {repr(__file__.rsplit('/', 1)[0])}); "
            f"from test_program_gaps_s24b import _deprecation_warnings as d; "
            f"print(repr(d(torch, {_DEPRECATED_LINALG[name]!r})))")
    want = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    got = _deprecation_warnings(tapelab, _DEPRECATED_LINALG[name])
    assert len(want) == 1 and got == want


def _functorch_primitives(m):
    """tensordict's vmap support: ``torch._C._functorch`` imported as a module, its batched-tensor
    predicates and wrappers used inside ``vmap``."""
    import importlib
    F = importlib.import_module(m.__name__ + "._C._functorch")
    seen = []

    def f(x):
        lvl = F.maybe_current_level()
        seen.append((F.is_batchedtensor(x), lvl, tuple(F.get_unwrapped(x).shape)))
        return x + F._add_batch_dim(m.arange(6.0).reshape(2, 3), 1, lvl)
    out = m.vmap(f)(m.ones(3, 2))
    with pytest.raises(RuntimeError, match="No wrappers present"):
        F.get_unwrapped(m.ones(1))
    expanded = F._remove_batch_dim(m.arange(2.0), 1, 3, 0)
    with pytest.raises(RuntimeError, match="expanded size of the tensor"):
        F._remove_batch_dim(m.arange(2.0), 1, 3, 1)
    return (out.tolist(), seen, F.maybe_current_level(), F.is_batchedtensor(m.ones(1)), F.is_gradtrackingtensor(m.ones(1)),
            expanded.tolist(), importlib.import_module(m.__name__ + "._C._nn")._parse_to(m.float64)[1] == m.float64)


def test_functorch_c_module_imports_and_wraps_vmap_values():
    assert _functorch_primitives(torch) == _functorch_primitives(tapelab)


def test_tensordict_import_names():
    """``torch.compiler.assume_constant_result`` hands the function back; ``nn.parameter.UninitializedTensorMixin``
    is the lazy tensors' base, as tensordict's isinstance checks expect."""
    for m in (torch, tapelab):
        f = lambda: 3   # noqa: E731
        assert m.compiler.assume_constant_result(f) is f
        mixin = m.nn.parameter.UninitializedTensorMixin
        assert isinstance(m.nn.parameter.UninitializedParameter(), mixin)
        assert isinstance(m.nn.parameter.UninitializedBuffer(), mixin) and not isinstance(m.nn.Parameter(m.ones(1)), mixin)
        assert not hasattr(m.nn, "UninitializedTensorMixin")


def test_worker_numpy_seed_is_pytorchs():
    """A DataLoader worker seeds numpy from ``_generate_state(base_seed, worker_id)`` as PyTorch's does
    (tapelab seeded it with ``(base_seed + worker_id) % 2**32``: ``np.random`` augmentations in workers
    drew other numbers); ``_generate_state`` is importable from ``torch.utils.data._utils.worker``."""
    import importlib
    import numpy as np
    want = importlib.import_module("torch.utils.data._utils.worker")._generate_state
    from tapelab.utils.data.worker import _generate_state
    for base, wid in [(0, 0), (123456789012345, 3), (2 ** 63 - 5, 7), (2 ** 32, 1)]:
        assert _generate_state(base, wid) == want(base, wid)

    def draws(m):
        class Noisy(m.utils.data.Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                return m.tensor([float(np.random.rand()), float(m.rand(1))])
        loader = m.utils.data.DataLoader(Noisy(), batch_size=2, num_workers=2, generator=m.Generator().manual_seed(7))
        return [b.tolist() for b in loader]
    assert draws(tapelab) == draws(torch)


def _weak_refs(m):
    import gc
    W = m.utils.weak
    d = W.WeakIdKeyDictionary()
    a, b = m.ones(2), m.ones(2)
    d[a], d[b] = "a", "b"
    res = [len(d), d[a], d[b], a in d, m.zeros(1) in d, sorted(d.values())]
    del a
    gc.collect()
    res += [len(d), list(d.values()), [x.tolist() for x in d]]
    c = m.ones(1)
    ref_b, ref_c = W.TensorWeakRef(b), W.TensorWeakRef(c)
    del c
    gc.collect()
    res += [ref_b() is b, ref_c(), W.WeakIdRef(b) == W.WeakIdRef(b), hash(W.WeakIdRef(b)) == id(b)]
    with pytest.raises(AssertionError, match="expected .*Tensor, got <class 'list'>"):
        W.TensorWeakRef([1])
    d2 = W.WeakIdKeyDictionary({b: 1})
    d2.setdefault(b, 5)
    return res + [d2.pop(b), len(d2), W.WeakTensorKeyDictionary is W.WeakIdKeyDictionary]


def test_utils_weak_identity_keyed_dictionaries():
    """tensordict imports ``torch.utils.weak.WeakIdKeyDictionary``: tensors as weakly held keys compared
    by identity, entries gone with their keys; ``TensorWeakRef``, ``WeakIdRef``."""
    assert _weak_refs(torch) == _weak_refs(tapelab)


def _shifts_and_old_names(m):
    a, b = m.tensor([1, 2, -8, 5]), m.tensor([1, 0, 2, 3])
    res = [(a << 1).tolist(), (a >> b).tolist(), (3 << b).tolist(), (64 >> b).tolist(), a.__rrshift__(100).tolist(),
           (m.tensor([1, 2], dtype=m.uint8) << 7).tolist(), (m.tensor([True, False]) << 1).dtype == m.int64,
           (m.tensor(3) << m.tensor([1, 2])).tolist()]
    c = a.clone()
    c <<= 1
    c >>= b
    res.append(c.tolist())
    for bad in (lambda: a.float() << 1, lambda: a << 1.5, lambda: 1 >> a.double(), lambda: m.gcd(a.float(), a.float()),
                lambda: m.bitwise_left_shift(m.tensor([True]), m.tensor([True]))):
        with pytest.raises(NotImplementedError) as info:
            bad()
        res.append(str(info.value))
    res += [reversed(a).tolist(), reversed(m.ones(2, 3)).shape == (2, 3), reversed(m.tensor(5)).tolist(),
            a.__div__(2).tolist(), a.__rdiv__(2).tolist(), a.float().__idiv__(2).tolist(), m.tensor(1.0).__nonzero__(),
            m.tensor(2.7).__long__()]
    for convert in (int, float, complex, lambda t: t.__long__()):
        with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
            convert(m.ones(2))
        with pytest.raises(ValueError, match="only one element tensors"):
            convert(m.ones(0))
    return res


def test_shift_operators_reversed_and_python2_names():
    """functorch's ``dim`` module (tensordict imports it) reads ``Tensor.__div__``, ``__lshift__`` and the
    other pointwise dunders; tapelab had no ``<<``/``>>`` operators at all, ``reversed(t)`` iterated rows
    instead of flipping, and the integer kernels' refusals (gcd, lcm, shifts) were RuntimeErrors judged per
    operand (a bool tensor shifted by an int is int64 in PyTorch)."""
    assert _shifts_and_old_names(torch) == _shifts_and_old_names(tapelab)


def _decorator_contexts(m):
    import importlib
    C = importlib.import_module(m.__name__ + ".utils._contextlib")
    log = []

    class Tag(C._DecoratorContextManager):
        def __init__(self, name="t"):
            self.name = name

        def __enter__(self):
            log.append(f"enter {self.name}")

        def __exit__(self, *exc):
            log.append(f"exit {self.name}")

        def clone(self):
            return Tag(self.name)

    class Bare(C._NoParamDecoratorContextManager):
        def __enter__(self):
            log.append("bare in")

        def __exit__(self, *exc):
            log.append("bare out")

    @Tag("f")
    def f(x):
        log.append("body")
        return x + 1

    @Bare
    def g():
        return "g"

    @Tag("gen")
    def counter(n):
        for i in range(n):
            log.append(f"step {i}")
            got = yield i
            log.append(f"got {got}")
        return "done"

    res = [f(1), g()]
    gen = counter(2)
    res += [next(gen), gen.send("a"), log[:]]
    with pytest.raises(StopIteration) as info:
        gen.send("b")
    res.append(info.value.value)

    x = m.ones(2, requires_grad=True)

    @m.no_grad()
    def steps():
        for _ in range(2):
            yield (x * 2).requires_grad
    res.append(list(steps()))
    with pytest.raises(RuntimeError, match="Cannot decorate classes"):
        C.context_decorator(lambda: Tag(), type("K", (), {}))
    with pytest.raises(AssertionError, match="both callable and also a valid context manager"):
        C.context_decorator(Tag(), f)
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        Tag()(type("K", (), {}))
    return res + [log]


def test_decorator_context_managers_and_generator_functions():
    """tensordict subclasses ``torch.utils._contextlib._DecoratorContextManager``; a grad mode decorating a
    generator function runs each step inside the mode (tapelab ran only the generator's creation under
    ``no_grad``, so its steps recorded gradients)."""
    assert _decorator_contexts(torch) == _decorator_contexts(tapelab)


def _member_swaps(m):
    import importlib
    A = importlib.import_module(m.__name__ + ".nn.utils._named_member_accessor")
    lin = m.nn.Linear(2, 2)
    lin.register_buffer("b", m.ones(1))
    w = lin.weight
    res = [A.swap_tensor(lin, "weight", m.zeros(2, 2)) is w, lin.weight.sum().item(), "weight" in lin._parameters,
           A.swap_tensor(lin, "b", m.zeros(1)).tolist(), lin.b.tolist(),
           A.swap_tensor(lin, "extra", m.ones(1), allow_missing=True) is A._MISSING, lin.extra.tolist(),
           A.swap_tensor(lin, "extra", A._MISSING).tolist(), hasattr(lin, "extra")]
    seq = m.nn.Sequential(m.nn.Linear(1, 1))
    first = seq[0]
    res.append(A.swap_submodule(seq, "0", m.nn.ReLU()) is first and isinstance(seq[0], m.nn.ReLU))
    for bad, kind, words in [(lambda: A.swap_tensor(lin, "a.b", m.ones(1)), KeyError, "name can.*contain"),
                             (lambda: A.swap_tensor(lin, "", m.ones(1)), KeyError, "empty string"),
                             (lambda: A.swap_tensor(lin, "nope", m.ones(1)), AttributeError, "Linear has no attribute `nope`"),
                             (lambda: A.swap_tensor(lin, "bias", 3.0), TypeError, "is not an instance of torch.Tensor"),
                             (lambda: A.swap_tensor(lin, "training", m.ones(1)), TypeError, "attribute `training`"),
                             (lambda: A.swap_submodule(seq, "9", m.nn.ReLU()), KeyError, "does not exist")]:
        with pytest.raises(kind, match=words):
            bad()
    return res


def test_named_member_accessor_swaps_tensors_and_submodules():
    """tensordict's ``to_module`` imports ``torch.nn.utils._named_member_accessor.swap_tensor``: a tensor
    into a module's parameter, buffer or attribute slot, the old one handed back (functional_call's
    swaps now go through it too)."""
    assert _member_swaps(torch) == _member_swaps(tapelab)


def test_pytree_namedtuple_and_structseq_predicates():
    """tensordict imports ``is_structseq_instance``; the predicates follow PyTorch's definitions (a struct
    sequence is a final direct tuple subclass with the field counts, as ``os.stat_result``)."""
    import collections
    import os
    P = collections.namedtuple("P", "a b")
    fake = type("Fake", (tuple,), {"_fields": ("a",)})   # _fields without _make/_asdict: no namedtuple
    samples = [P(1, 2), P, (1, 2), os.stat("."), type(os.stat(".")), fake((1,)), [1], None]
    for name in ("is_namedtuple", "is_structseq"):
        for m in (torch, tapelab):
            assert [getattr(m.utils._pytree, name)(x) for x in samples] == \
                [getattr(torch.utils._pytree, name)(x) for x in samples]
    for name in ("is_namedtuple_instance", "is_structseq_instance"):
        assert [getattr(tapelab.utils._pytree, name)(x) for x in samples] == \
            [getattr(torch.utils._pytree, name)(x) for x in samples]
    for name in ("is_namedtuple_class", "is_structseq_class"):
        classes = [P, tuple, type(os.stat(".")), fake, int]
        assert [getattr(tapelab.utils._pytree, name)(c) for c in classes] == \
            [getattr(torch.utils._pytree, name)(c) for c in classes]


def test_private_device_helpers():
    """tensordict imports ``torch._utils._get_available_device_type`` and ``_get_device_module``."""
    for m in (torch, tapelab):
        assert m._utils._get_available_device_type() == ("cuda" if m.cuda.is_available() else None)
        assert m._utils._get_device_module("cuda") is m.cuda and m._utils._get_device_module("cpu") is m.cpu
        with pytest.raises(RuntimeError, match="Device 'nope' does not have a corresponding module registered as 'torch.nope'"):
            m._utils._get_device_module("nope")


def test_hub_tqdm_and_download_progress(tmp_path, capsys):
    """torchio imports ``tqdm`` from ``torch.hub``; ``download_url_to_file(progress=True)`` shows the
    download's progress on stderr through it, as PyTorch's does, and nothing with ``progress=False``."""
    assert tapelab.hub.tqdm is torch.hub.tqdm
    src = tmp_path / "blob.bin"
    src.write_bytes(b"x" * 5000)
    for m in (torch, tapelab):
        m.hub.download_url_to_file(src.as_uri(), str(tmp_path / f"{m.__name__}.bin"), progress=True)
        err = capsys.readouterr().err
        assert "100%" in err and "4.88k" in err, err
        m.hub.download_url_to_file(src.as_uri(), str(tmp_path / f"{m.__name__}2.bin"), progress=False)
        assert capsys.readouterr().err == ""
        assert (tmp_path / f"{m.__name__}.bin").read_bytes() == src.read_bytes()


def test_device_and_stream_obj_types_and_clipped_sigmoid():
    """pytorch-forecasting annotates ``device: str | torch.DeviceObjType`` at import and imports
    ``torch.distributions.transforms._clipped_sigmoid``."""
    for m in (torch, tapelab):
        for name, printed in (("DeviceObjType", "Device"), ("StreamObjType", "Stream")):
            cls = getattr(m, name)
            assert getattr(m._C, name) is cls and issubclass(cls, m.Type) and str(cls.get()) == printed
            assert cls.get() is cls.get() and not isinstance(m.device("cpu"), cls)
            with pytest.raises(TypeError, match=f"torch._C.{name}: No constructor defined"):
                cls()
        assert (str | m.DeviceObjType) is not None
    x = [-100.0, 0.0, 3.0, 100.0]
    for dt in ("float32", "float64"):
        want = torch.distributions.transforms._clipped_sigmoid(torch.tensor(x, dtype=getattr(torch, dt)))
        got = tapelab.distributions.transforms._clipped_sigmoid(tapelab.tensor(x, dtype=getattr(tapelab, dt)))
        assert got.tolist() == want.tolist()


def _file_writer_events(m, logdir):
    import glob
    import importlib
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    tb = importlib.import_module(m.__name__ + ".utils.tensorboard")
    summary = importlib.import_module(m.__name__ + ".utils.tensorboard.summary")
    w = tb.SummaryWriter(logdir)
    fw = w._get_file_writer()
    for s in summary.hparams({"lr": 0.1, "layers": 2}, {"loss": 0.5}):
        fw.add_summary(s, 3)
    w.add_scalar("loss", 0.5, 4)
    fw.flush()
    w.close()
    events = [e for f in sorted(glob.glob(f"{logdir}/events.*")) for e in EventFileLoader(f).Load()]
    return fw.get_logdir() == logdir, [(e.step, [v.tag for v in e.summary.value]) for e in events if e.summary.value]


def test_summary_writer_file_writer_takes_summaries(tmp_path):
    """Lightning's ``TensorBoardLogger.log_hyperparams`` (pytorch-forecasting's ``predict`` makes one) writes
    the hparams summaries through ``SummaryWriter._get_file_writer().add_summary``."""
    pytest.importorskip("tensorboard")
    assert _file_writer_events(tapelab, str(tmp_path / "tl")) == _file_writer_events(torch, str(tmp_path / "pt"))
