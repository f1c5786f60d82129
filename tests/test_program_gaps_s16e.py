"""Gaps found in session 16 running scientific and geometric libraries on top of PyTorch unchanged
(e3nn, torchsde, geomloss, botorch/gpytorch, pypose, torchquad), each checked against real torch."""
from __future__ import annotations

import contextlib

import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


def test_torch_functional_module_holds_the_public_composites():
    """opt_einsum_fx (e3nn's dependency) builds ``{torch.functional.einsum, torch.einsum}`` at import:
    torch.functional is a module whose names are the very top-level functions."""
    import torch.functional as theirs
    import tapelab.functional as ours
    assert ours.__all__ == theirs.__all__
    for name in theirs.__all__:
        assert getattr(ours, name) is getattr(tapelab, name), name


@BOTH
@pytest.mark.parametrize("form", ["flat", "list", "sublist"])
def test_fx_records_einsum_with_flat_operands(m, form):
    """e3nn's tensor products call ``torch.einsum(eq, (a, b))``; PyTorch turns a list of operands
    into ``(equation, *operands)`` before __torch_function__, so opt_einsum_fx's shape propagation
    finds each operand's ``.shape`` in the node's args. The sublist form on Proxies is recorded as
    written and converted when the graph runs."""
    def f(a, b):
        if form == "flat":
            return m.einsum("ij,jk->ik", a, b)
        if form == "list":
            return m.einsum("ij,jk->ik", [a, b])
        return m.einsum(a, [0, 1], b, [1, 2], [0, 2])
    g = m.fx.symbolic_trace(f)
    (node,) = [n for n in g.graph.nodes if n.op == "call_function"]
    if form == "sublist":
        assert node.args[0].name == "a" and node.args[1] == [0, 1] and node.args[4] == [0, 2]
    else:
        assert node.args[0] == "ij,jk->ik" and [a.name for a in node.args[1:]] == ["a", "b"]
    a, b = m.ones(2, 3), m.ones(3, 4)
    assert g(a, b).tolist() == m.full((2, 4), 3.0).tolist()


@BOTH
def test_einsum_sublist_implicit_output_is_in_subscript_order(m):
    """Subscripts 0-25 are 'A'-'Z' and 26-51 'a'-'z' in PyTorch: the implicit output keeps
    ``[0, 30]`` in that order (lowercase-first letters would transpose it)."""
    x = m.arange(6.0).reshape(2, 3)
    assert m.einsum(x, [0, 30]).tolist() == x.tolist()
    assert m.einsum(x, [30, 0]).tolist() == x.T.tolist()


@BOTH
def test_assert_raises_on_false_and_is_traced_on_a_proxy(m):
    """e3nn's Extract checks ``torch._assert(x.shape[-1] == dim, msg)``: eager it is ``assert``, under
    fx the comparison's Proxy makes it a call_function node that runs when the graph runs."""
    m._assert(True, "fine")
    m._assert(m.tensor(1.0), "fine")
    with pytest.raises(AssertionError, match="bad shape"):
        m._assert(False, "bad shape")

    def f(x):
        m._assert(x.shape[-1] == 3, "bad shape")
        return x * 2
    g = m.fx.symbolic_trace(f)
    assert m._assert in [n.target for n in g.graph.nodes]
    assert g(m.ones(2, 3)).sum().item() == 12.0
    with pytest.raises(AssertionError, match="bad shape"):
        g(m.ones(2, 4))


@pytest.mark.parametrize("dim,seed", [(1, 0), (2, 1), (5, 7), (40, 123)])
def test_sobol_scrambled_draws_equal_torch(dim, seed):
    """botorch's qMC acquisition functions draw from ``SobolEngine(d, scramble=True, seed=s)``: the
    linear matrix scramble and digital shift come from ``randint`` on a generator seeded with ``s``,
    so the points (first, later, fast-forwarded, after reset, float64) are PyTorch's."""
    ours = tapelab.quasirandom.SobolEngine(dim, scramble=True, seed=seed)
    theirs = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed)
    for step in (lambda e, m: e.draw(), lambda e, m: e.draw(7), lambda e, m: e.draw(9, dtype=m.float64),
                 lambda e, m: e.fast_forward(13).draw(3), lambda e, m: e.reset().draw_base2(4),
                 lambda e, m: e.reset().draw(5, dtype=m.float64)):
        a, b = step(ours, tapelab), step(theirs, torch)
        assert a.dtype.itemsize == b.dtype.itemsize and a.tolist() == b.tolist()


def test_sobol_unseeded_scramble_draws_from_the_default_generator_as_torch():
    """Without a seed the scramble's ``randint`` calls use the global generator: after
    ``manual_seed`` the points, and the next ``rand``, are PyTorch's."""
    draws = []
    for m in (torch, tapelab):
        m.manual_seed(3)
        draws.append((m.quasirandom.SobolEngine(3, scramble=True).draw(4).tolist(), m.rand(2).tolist()))
    assert draws[0] == draws[1]


@BOTH
def test_numpy_of_a_tensor_requiring_grad_is_allowed_under_no_grad(m):
    """botorch's ``as_ndarray`` reads parameters with ``.numpy()`` inside ``torch.no_grad()``:
    PyTorch refuses a tensor that requires grad only while grad mode is on."""
    p = m.nn.Parameter(m.ones(3))
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        p.numpy()
    with m.no_grad():
        assert p.view(-1).numpy().tolist() == [1.0, 1.0, 1.0]
    with m.inference_mode():
        assert p.numpy().tolist() == [1.0, 1.0, 1.0]


_LIB_SEQ = iter(range(10 ** 6))


@BOTH
def test_library_define_impl_serves_torch_ops(m):
    """pypose imports ``torch.library.Library``; libraries define ops with ``Library(ns, "DEF")``,
    ``define(schema)`` and ``impl(name, fn, key)``, then call ``torch.ops.ns.name`` (an overload
    packet: ``.default`` and named overloads); no kernel yet is NotImplementedError, a second DEF
    of the namespace or a second definition of an overload RuntimeError, a bad kind ValueError."""
    ns = f"s16e_{m.__name__}_{next(_LIB_SEQ)}"
    lib = m.library.Library(ns, "DEF")
    assert lib.define("foo(Tensor x, float s=2.0) -> Tensor") == "foo"
    assert lib.define("foo.plus(Tensor x, float s) -> Tensor") == "foo"
    packet = getattr(m.ops, ns).foo
    with pytest.raises(NotImplementedError, match=f"Could not run '{ns}::foo' with arguments from the 'CPU'"):
        packet(m.ones(2))
    lib.impl("foo", lambda x, s=2.0: x * s, "CPU")
    lib.impl("foo.plus", lambda x, s: x + s, "CompositeExplicitAutograd")
    x = m.ones(2, requires_grad=True)
    assert packet(x).tolist() == [2.0, 2.0] and packet.default(x, s=3.0).tolist() == [3.0, 3.0]
    assert packet.plus(x, 5.0).tolist() == [6.0, 6.0] and sorted(packet.overloads()) == ["default", "plus"]
    with pytest.warns(UserWarning) if m is torch else contextlib.nullcontext():
        packet(x).sum().backward()   # the kernel's own ops carry the gradient (torch warns: no autograd kernel)
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(AttributeError, match=f"'{ns}.foo' has no overload name 'nope'"):
        packet.nope
    with pytest.raises(RuntimeError, match=f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}"):
        m.library.Library(ns, "DEF")
    with pytest.raises(ValueError, match="Unsupported kind: BAD"):
        m.library.Library(ns, "BAD")
    frag = m.library.Library(ns, "FRAGMENT")
    frag.define("bar(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="same name and overload name multiple times"):
        frag.define("bar(Tensor x) -> Tensor")
    impl = m.library.Library(ns, "IMPL", "CPU")
    impl.impl("bar", lambda x: x + 10)
    assert getattr(m.ops, ns).bar(m.zeros(1)).tolist() == [10.0]
    del impl   # a collected library takes its kernels with it
    with pytest.raises(NotImplementedError, match=f"Could not run '{ns}::bar'"):
        getattr(m.ops, ns).bar(m.zeros(1))
    m.library.define(f"{ns}::baz", "(Tensor x) -> Tensor")

    @m.library.impl(f"{ns}::baz", "cpu")
    def baz(x):
        return x * 7
    assert getattr(m.ops, ns).baz.default(m.ones(1)).tolist() == [7.0]
    del lib, frag   # the DEF library's namespace is free again once it is collected
    m.library.Library(ns, "DEF")


@BOTH
def test_func_jac_signatures_as_torch(m):
    """pypose calls ``torch.func.jacrev(..., _preallocate_and_copy=...)``; ``jacfwd`` takes
    ``has_aux`` positionally and ``randomness`` by keyword."""
    f = lambda x: (x.sin(), x.cos())   # noqa: E731
    x = m.tensor([0.0, 1.0])
    j = m.func.jacrev(lambda x: x.sin(), 0, chunk_size=1, _preallocate_and_copy=True)(x)
    jf, aux = m.func.jacfwd(f, 0, True, randomness="same")(x)
    assert j.tolist() == jf.tolist() and aux.tolist() == x.cos().tolist()


def test_tensor_classes_answer_to_torch_modules_while_aliased():
    """autoray (torchquad, quimb) picks the array library from ``type(x).__module__.split('.')[0]``
    and maps ``expand_dims``/``random.seed`` only for ``"torch"``: under the aliases tapelab's tensor
    classes report PyTorch's modules (``Tensor``: ``torch``, ``Parameter``: ``torch.nn.parameter``),
    and their own again after."""
    assert (torch.Tensor.__module__, torch.nn.Parameter.__module__) == ("torch", "torch.nn.parameter")
    own = (tapelab.Tensor.__module__, tapelab.nn.Parameter.__module__)
    with tapelab.install_aliases():
        import torch as aliased
        assert aliased.Tensor is tapelab.Tensor
        assert (type(aliased.ones(1)).__module__, aliased.nn.Parameter.__module__) == ("torch", "torch.nn.parameter")
        assert repr(type(aliased.ones(1))) == repr(torch.Tensor) == "<class 'torch.Tensor'>"
    assert (tapelab.Tensor.__module__, tapelab.nn.Parameter.__module__) == own
    assert own[0].startswith("tapelab.")


def _traced_model(m):
    class Traced(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = m.nn.Linear(3, 2)
            self.register_buffer("shift", m.ones(2))

        def forward(self, x):
            return self.l(x).relu() + self.shift + x.sum(1, keepdim=True).exp()
    return Traced()


@BOTH
@pytest.mark.parametrize("how", ["pickle", "save", "deepcopy", "held"])
def test_graph_module_pickles_and_copies_as_torch(m, how):
    """e3nn keeps fx GraphModules in its tensor products: ``torch.save(model)`` and ``jit.save`` of
    them pickled the per-instance class and failed. PyTorch pickles the state and the generated code
    and traces it again on load; a copy (deep or unpickled) is named ``GraphModule`` and computes
    the same, its weights its own."""
    import copy
    import io
    import pickle
    m.manual_seed(0)
    gm = m.fx.symbolic_trace(_traced_model(m))
    if how == "pickle":
        g2 = pickle.loads(pickle.dumps(gm))
    elif how == "save":
        buf = io.BytesIO()
        m.save(gm, buf)
        buf.seek(0)
        g2 = m.load(buf, weights_only=False)
    elif how == "deepcopy":
        g2 = copy.deepcopy(gm)
    else:
        holder = m.nn.Sequential(gm)
        g2 = pickle.loads(pickle.dumps(holder))[0]
    x = m.randn(2, 3)
    assert type(gm).__name__ == "Traced" and type(g2).__name__ == "GraphModule"
    assert g2(x).tolist() == gm(x).tolist() and g2.code == gm.code
    assert g2.l.weight is not gm.l.weight and [n.op for n in g2.graph.nodes] == [n.op for n in gm.graph.nodes]


@pytest.mark.parametrize("namespace", ["", "nn.functional", "linalg", "special", "fft"])
def test_public_functions_pickle_by_reference_as_torch(namespace):
    """e3nn's Gate holds ``torch.sigmoid`` in the model ``torch.save`` writes; the out= wrappers
    claimed their inner function's module (``tapelab.ops.elementwise.sigmoid``, another object) and
    ops/special's unary functions elementwise's: every public function PyTorch pickles by reference
    pickles as itself here too."""
    import pickle

    def functions(root):
        mod = root
        for part in filter(None, namespace.split(".")):
            mod = getattr(mod, part)
        return {n: getattr(mod, n) for n in dir(mod)
                if not n.startswith("_") and callable(getattr(mod, n)) and not isinstance(getattr(mod, n), type)}

    def pickles_as_itself(f) -> bool:
        try:
            return pickle.loads(pickle.dumps(f)) is f
        except (pickle.PicklingError, AttributeError, TypeError):
            return False
    theirs, ours = functions(torch), functions(tapelab)
    names = [n for n, f in theirs.items() if n in ours and pickles_as_itself(f)]
    assert len(names) > 5
    assert [n for n in names if not pickles_as_itself(ours[n])] == []
