"""Everything known about an op is declared on its ``Op`` (issue 13, "one source of op metadata").

Each public op name (the ``__all__`` of the op families and of ``tapelab._nn_toplevel``) and
each Tensor attribute ``install_methods`` binds must resolve to a registered ``Op`` through
the declarations alone: the op's own name, one of its ``aliases`` or ``inplace`` names, its
Python ``operator`` (for dunders), or, for a hand-written in-place method ``x_``, what ``x``
resolves to. The few that are not one op are listed in ``COMPOSITES``, with the reason.
"""
from __future__ import annotations

import operator
import pathlib
import re

import numpy as np
import pytest
import torch

import tapelab
from tapelab import _nn_toplevel
from tapelab.ops import MODULES, REGISTRY, surface
from tapelab.profiler.flops import FLOP_TABLE, estimate_flops

ENGINE = pathlib.Path(tapelab.__file__).parent

# public names that are plain functions over several Tensor ops (or none), not one op
COMPOSITES = {
    "allclose": "isclose, then all: a Python bool",
    "equal": "a shape test and eq, then all: a Python bool",
    "var_mean": "var and mean", "std_mean": "std and mean",
    "broadcast_shapes": "shape arithmetic, no tensor",
    "inner": "mul or tensordot", "outer": "unsqueeze and mul", "ger": "outer",
    "addmm": "matmul, mul and add", "baddbmm": "matmul, mul and add",
    "trace": "diagonal and sum", "kron": "reshapes and mul",
    "__pos__": "the tensor itself",
    "__getitem__": "slice views for basic keys, then index for advanced ones",
    "__setitem__": "slice views for basic keys, then index_put (or copy_)",
    "dropout": "a random mask and mul",
    "batch_norm": "batch_norm_normalize or running statistics",
    "cosine_similarity": "norms and a sum",
    "hardshrink": "where over two comparisons (nn.functional)", "prelu": "where and mul (nn.functional)",
}
# op families list their own composites beside their code (``COMPOSITES`` in the module)
for _mod in MODULES:
    COMPOSITES.update(getattr(_mod, "COMPOSITES", {}))


def _by_operator() -> dict:
    return {getattr(operator, op.operator): op for op in REGISTRY.values() if op.operator}


def declared_op(name: str):
    """The op that public name ``name`` runs, from the declarations alone (None if none)."""
    if name in REGISTRY:
        return REGISTRY[name]
    for op in REGISTRY.values():
        if name in op.aliases or name in op.inplace:
            return op
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        ops = _by_operator()
        for cand in (core, core[1:]) if core[:1] in ("r", "i") else (core,):
            fn = getattr(operator, f"__{cand}__", None)
            if fn in ops:
                return ops[fn]
        return None
    if name.endswith("_"):
        return declared_op(name[:-1])
    return None


def _public_functions() -> set:
    names = set(_nn_toplevel.__all__)
    for mod in MODULES:
        names.update(mod.__all__)
    return names


def _tensor_attributes() -> dict:
    return {**surface(), **surface((_nn_toplevel,), ())}


def _public_names() -> set:
    return _public_functions() | set(_tensor_attributes())


def test_every_public_op_and_tensor_method_has_a_declaration():
    names = _public_names()
    missing = sorted(n for n in names if declared_op(n) is None and n not in COMPOSITES)
    assert not missing, (f"public names with no Op declaration: {missing}. Declare each on its op "
                         f"(aliases=, inplace=, operator=) or, if it is a plain function over several "
                         f"Tensor ops, list it in COMPOSITES with the reason")
    print(f"\n{len(REGISTRY)} registered primitives; {len(_public_functions())} public op functions, "
          f"{len(_tensor_attributes())} Tensor attributes bound by install_methods, "
          f"{len(COMPOSITES)} composites")


def test_composites_are_public_and_not_declared_ops():
    names = _public_names()
    assert sorted(set(COMPOSITES) - names) == [], "a listed composite that is no public name"
    assert sorted(c for c in COMPOSITES if declared_op(c) is not None) == [], \
        "a listed composite that is a declared op: drop it from COMPOSITES"


def test_declared_names_exist():
    """No stale declaration: every alias is a public name, every operator is Python's."""
    names = _public_names()
    for op in REGISTRY.values():
        assert set(op.aliases) <= names, f"{op.name}: aliases {sorted(set(op.aliases) - names)} are not public"
        if op.operator is not None:
            assert callable(getattr(operator, op.operator, None)), f"{op.name}: no operator.{op.operator}"
        if op.ufunc is not None:
            assert isinstance(getattr(np, op.ufunc), np.ufunc), f"{op.name}: np.{op.ufunc} is not a ufunc"
        if op.out_form is not None:
            assert callable(getattr(np, op.out_form)), f"{op.name}: no np.{op.out_form}"


def test_tensor_attributes_are_the_installed_declarations():
    """Nothing replaced a declared Tensor method after install_methods bound it."""
    for name, value in _tensor_attributes().items():
        bound = vars(tapelab.Tensor)[name]
        if name in {n for op in REGISTRY.values() for n in op.inplace}:
            assert bound.__name__ == name and bound.__qualname__.startswith("_inplace"), name
        elif isinstance(value, property):
            assert bound.fget is value.fget, name
        else:
            assert bound is value, f"Tensor.{name} is not the function its module declares"


def test_a_name_declared_twice_is_refused():
    import types
    twice = types.SimpleNamespace(__name__="twice", METHODS=("exp",), exp=tapelab.exp,
                                  OPERATORS={"exp": tapelab.exp})
    with pytest.raises(RuntimeError, match=r"Tensor\.exp is declared twice \(again in twice\.OPERATORS\)"):
        surface((twice,), ())
    with pytest.raises(RuntimeError, match="declared twice"):
        surface((tapelab.ops.elementwise,), [REGISTRY["exp"], REGISTRY["exp"]])


def test_flop_formulas_live_on_the_ops():
    costed = {"matmul", "convolution", "convolution_transpose", "convolution_weight", "add", "sub", "mul", "div"}
    assert costed <= {name for name, op in REGISTRY.items() if op.cost is not None}
    assert set(FLOP_TABLE) == {name for name, op in REGISTRY.items() if op.cost is not None}
    shapes = {"matmul": (((4, 5), (5, 6)), (4, 6)), "convolution": (((2, 3, 8, 8), (4, 3, 3, 3)), (2, 4, 6, 6)),
              "convolution_transpose": (((2, 4, 6, 6), (4, 3, 3, 3)), (2, 3, 8, 8)),
              "convolution_weight": (((2, 3, 8, 8), (2, 4, 6, 6)), (4, 3, 3, 3)),
              "add": (((4, 5), (4, 5)), (4, 5))}
    want = {"matmul": 2 * 24 * 5, "convolution": 2 * (2 * 4 * 36) * 27, "convolution_transpose": 2 * (2 * 4 * 36) * 27,
            "convolution_weight": 2 * (2 * 4 * 36) * 27, "add": 20}
    for name, (ins, out) in shapes.items():
        assert estimate_flops(name, ins, out) == REGISTRY[name].cost(ins, out) == want[name], name
    assert estimate_flops("exp", ((3,),), (3,)) == 0


_OP_FIELD_WRITE = re.compile(r"(?<!self)\.(fwd|vjp|ufunc|out_form|cost|onnx|data_dependent|aliases|inplace)"
                             r"\s*=(?!=)|setattr\(\s*(op|REGISTRY)\b")
_TENSOR_WRITE = re.compile(r"\bTensor\.\w+\s*=(?!=)|setattr\(\s*Tensor\b")


def test_no_op_or_tensor_attribute_is_assigned_after_its_declaration():
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE).as_posix()
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if rel != "ops/registry.py" and _OP_FIELD_WRITE.search(code):
                offenders.append(f"{rel}:{i}: {line.strip()}")
            if _TENSOR_WRITE.search(code):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "op metadata or Tensor attributes set outside their declaration:\n" + "\n".join(offenders)


def test_declared_metadata():
    assert REGISTRY["matmul"].out_form == "matmul" and REGISTRY["matmul"].operator == "matmul"
    assert REGISTRY["nonzero"].data_dependent == "nonzero()/argwhere()"
    assert REGISTRY["unique"].data_dependent == "unique()"
    assert {n: REGISTRY[n].ufunc for n in ("add", "sub", "mul", "div", "neg", "abs", "maximum", "minimum")} == {
        "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "neg": "negative", "abs": "absolute",
        "maximum": "maximum", "minimum": "minimum"}
    assert all(op.out_form == op.ufunc for op in REGISTRY.values() if op.ufunc)
    # the math PyTorch runs through MKL's VML writes into a buffer through its own forward, not numpy's ufunc
    for n in ("exp", "log", "sqrt", "tanh", "sin", "cos"):
        assert REGISTRY[n].ufunc is None and REGISTRY[n].fwd_out.__name__ == f"{n}_fwd_out"


# ---------------------------------------------------------------- qr is born in apply
def test_tape_records_qr():
    a = tapelab.randn(5, 3, requires_grad=True)
    b = tapelab.randn(3, 2)
    with tapelab.tape() as t:
        loss = tapelab.linalg.qr(a)[0].matmul(b).sum()
    # one qr op gives Q and R packed; Q and R are slices of it
    assert [n.op for n in t.nodes] == ["qr", "slice", "slice", "matmul", "sum"]
    loss.backward()
    assert a.grad is not None and a.grad.shape == a.shape


def test_qr_gradient_matches_torch():
    rng = np.random.default_rng(0)
    for shape, mode in (((5, 3), "reduced"), ((2, 3, 5), "reduced"), ((3, 4), "complete")):
        x = rng.standard_normal(shape)
        a, ta = tapelab.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        q, r = tapelab.linalg.qr(a, mode)
        tq, tr = torch.linalg.qr(ta, mode)
        wq, wr = rng.standard_normal(tq.shape), rng.standard_normal(tr.shape)
        ((q * tapelab.tensor(wq)).sum() + (r * tapelab.tensor(wr)).sum()).backward()
        ((tq * torch.tensor(wq)).sum() + (tr * torch.tensor(wr)).sum()).backward()
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-10)


def test_qr_backward_refusals_match_torch():
    a = tapelab.randn(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        tapelab.linalg.qr(a, "r")[1].sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        tapelab.linalg.qr(a, "complete")[0].sum().backward()
