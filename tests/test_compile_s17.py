"""tapelab.compile and fx, issue 18 session 17: container arguments under ``fullgraph=True`` (PyTorch's
``torch.compile`` takes a tuple, list, dict or namedtuple of tensors), and generated code printed as
the program imported the package (``torch.add`` under ``install_aliases``, as PyTorch prints it), still
executable. Real torch is the reference: its eager values (``torch.compile`` returns those) and its
fx text."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import tapelab
from tapelab.compiler import Unsupported


def _pair(lib, seed=0):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True) for _ in range(2)]


def _chain(xs, s):
    a, b = xs
    return (a * b + s).tanh().sum()


def test_fullgraph_takes_a_tuple_argument_and_gives_torchs_values_and_gradients():
    want_a, want_b = _pair(torch)
    want = _chain((want_a, want_b), 2.0)
    want.backward()
    a, b = _pair(tapelab)
    f = tapelab.compile(_chain, fullgraph=True)
    for _ in range(3):        # traced, then the compiled graph
        a.grad = b.grad = None
        got = f((a, b), 2.0)
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(a.grad.numpy(), want_a.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(b.grad.numpy(), want_b.grad.numpy(), rtol=1e-5, atol=1e-7)
    entries = f.nested[next(iter(f.nested))].cache.values()
    assert [e.graph is not None and e.reason is None for e in entries] == [True]   # one graph, no break
    got = f([a, b], s=3.0)            # another structure (a list, s by keyword): its own graph
    np.testing.assert_allclose(got.item(), _chain(_pair(torch), 3.0).item(), rtol=1e-6)
    assert len(f.nested) == 2


def test_a_module_compiled_with_a_state_tuple_and_nested_outputs():
    """An LSTM-style cell: ``forward(x, (h, c))`` returning ``out, (h, c)``."""
    outs = []
    for lib in (torch, tapelab):
        lib.manual_seed(0)

        class Cell(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(4, 4)

            def forward(self, x, state):
                h, c = state
                c = lib.sigmoid(self.lin(x)) * c + h
                return lib.tanh(c), (h, c)
        cell = Cell()
        x, h, c = (lib.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4) * k) for k in (1, 2, 3))
        call = tapelab.compile(cell, fullgraph=True) if lib is tapelab else cell
        for _ in range(3):
            cell.zero_grad()
            out, (_, c2) = call(x, (h, c))
            (out.sum() + (c2 * c2).sum()).backward()
        outs.append([out.detach().numpy(), c2.detach().numpy(), cell.lin.weight.grad.numpy()])
    for got, want in zip(outs[1], outs[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_namedtuple_and_dict_arguments_and_their_guards():
    P = collections.namedtuple("P", "x y")
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 7
    g = tapelab.compile(lambda p: p.x * 2 + p.y, fullgraph=True)
    d = tapelab.compile(lambda d: d["u"] @ d["v"], fullgraph=True)
    tx = tapelab.tensor(x)
    for _ in range(2):
        np.testing.assert_allclose(g(P(tx, tx)).numpy(), (torch.tensor(x) * 2 + torch.tensor(x)).numpy())
        np.testing.assert_allclose(d({"u": tx, "v": tx.T}).numpy(), (torch.tensor(x) @ torch.tensor(x).T).numpy(),
                                   rtol=1e-6)
    report = tapelab.compiler.explain(d, {"u": tx, "v": tx.T})
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert "arg0['u']: Tensor shape=(2, 4) dtype=float32 device=cpu requires_grad=False" in report.out_guards
    assert "arg0['v']: Tensor shape=(4, 2) dtype=float32 device=cpu requires_grad=False" in report.out_guards


def test_fullgraph_still_refuses_a_break_inside_a_tuple_call():
    def f(xs):
        a, b = xs
        return a * 2 if a.sum() > 0 else b       # data-dependent Python: a graph break
    a, b = _pair(tapelab)
    with pytest.raises(Unsupported, match="data-dependent"):
        tapelab.compile(f, fullgraph=True)((a, b))


def _traced(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(4, 3)

        def forward(self, x):
            y = lib.add(x, 1.0).to(lib.float64).float()
            z = lib.nn.functional.relu(self.lin(y))
            return lib.tanh(z).sum(dim=-1) + lib.sigmoid(x).mean()
    lib.manual_seed(0)
    return lib.fx.symbolic_trace(M())


def test_generated_code_under_aliases_reads_torch_as_pytorchs_and_runs():
    want = _traced(torch)
    with tapelab.install_aliases():
        import torch as aliased
        assert aliased is tapelab
        gm = _traced(aliased)
        texts = gm.code, gm.print_readable(print_output=False), str(gm.graph)
        x = tapelab.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
        out = gm(x)
    assert texts == (want.code, want.print_readable(print_output=False), str(want.graph))
    assert "torch.add(x, 1.0)" in texts[0] and "torch.float64" in texts[0] and "tapelab" not in "".join(texts)
    tx = torch.tensor(x.numpy())
    np.testing.assert_allclose(out.detach().numpy(), want(tx).detach().numpy(), rtol=1e-6)
    plain = _traced(tapelab)          # without aliases: the package's own name, as before
    assert "tapelab.add(x, 1.0)" in plain.code and plain.print_readable(False).startswith("class M(tapelab.nn.Module)")


def test_compiled_graphs_and_to_folder_under_aliases(tmp_path):
    with tapelab.install_aliases():
        import torch as aliased
        report = aliased._dynamo.explain(lambda x: aliased.softmax(x, -1).max() + x.sum())(aliased.randn(2, 3))
        listing = str(report.graphs[0].graph)
        gm = _traced(aliased)
        gm.to_folder(tmp_path / "exported_s17", "Exported")
        source = (tmp_path / "exported_s17" / "module.py").read_text()
        import sys
        sys.path.insert(0, str(tmp_path))
        try:
            from exported_s17 import Exported
            x = aliased.ones(2, 4)
            np.testing.assert_allclose(Exported()(x).detach().numpy(), gm(x).detach().numpy(), rtol=1e-6)
        finally:
            sys.path.remove(str(tmp_path))
            sys.modules.pop("exported_s17", None)
            sys.modules.pop("exported_s17.module", None)
    assert "tapelab" not in listing and "target=torch." in listing
    assert "import torch\n" in source and "class Exported(torch.nn.Module)" in source and "tapelab." not in source


def test_a_split_backward_is_one_cat_with_torchs_gradients():
    """``q, k, v = qkv(x).split(d, dim=-1)``: the compiled step's backward joins the three slices'
    gradients with one ``cat`` (it summed three zero-padded arrays); the gradients are PyTorch's."""
    got = []
    for lib in (torch, tapelab):
        lib.manual_seed(0)
        lin = lib.nn.Linear(8, 24)
        x = lib.tensor(np.linspace(-2, 2, 48, dtype=np.float32).reshape(2, 3, 8))

        def f(x):
            q, k, v = lin(x).split(8, dim=-1)
            return (q.tanh() * k + v.sigmoid() * 2).sum()
        call = tapelab.compile(f) if lib is tapelab else f
        for _ in range(3):
            lin.zero_grad()
            call(x).backward()
        got.append((lin.weight.grad.numpy().copy(), lin.bias.grad.numpy().copy()))
    for a, b in zip(got[1], got[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    step = next(iter(call.cache.values())).step
    backward = step.sources[1]     # cat(..., dim=2, skip=False), and no slice_backward(..., shape=, key=)
    assert "dim=2, skip=False)" in backward and "key=" not in backward, backward
