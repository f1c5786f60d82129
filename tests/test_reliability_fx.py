"""Issue 16, defect 4: names taken from data never become code in FX's generated source.

Each hostile name tries to create a marker file; the tests assert the file never appears
while tracing, recompiling or calling the traced module, and that the traced module still
does what the eager module does (the same result, or the same exception class).
"""
import importlib
import importlib.util
import operator
import sys

import numpy as np
import pytest

import tapelab
from tapelab import fx, nn


def _payload(marker) -> str:
    return f"open({str(marker)!r}, 'w')"


def test_hostile_method_name_from_config_is_quoted(tmp_path):
    marker = tmp_path / "pwned"
    config = {"act": f"relu() or {_payload(marker)} or x.relu"}

    class M(nn.Module):
        def forward(self, x):
            return getattr(x, config["act"])()

    gm = fx.symbolic_trace(M())
    assert not marker.exists()
    assert "getattr(x, " in gm.code
    with pytest.raises(AttributeError):       # as eager does: a Tensor has no such method
        gm(tapelab.ones(2))
    with pytest.raises(AttributeError):
        M()(tapelab.ones(2))
    assert not marker.exists()


def test_benign_method_name_from_config_still_traces():
    config = {"act": "relu"}

    class M(nn.Module):
        def forward(self, x):
            return getattr(x, config["act"])()

    gm = fx.symbolic_trace(M())
    assert "x.relu()" in gm.code
    x = tapelab.tensor([-1.0, 2.0])
    np.testing.assert_array_equal(gm(x).numpy(), [0.0, 2.0])


@pytest.mark.parametrize("name", ["class", "not an identifier", "a.b"])
def test_keyword_and_odd_method_names_compile(name):
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_method(name, (x,)))
    gm = fx.GraphModule(nn.Module(), g)
    assert f"getattr(x, {name!r})" in gm.code
    with pytest.raises(AttributeError):
        gm(tapelab.ones(1))


def test_crafted_kwarg_key_is_a_quoted_literal(tmp_path):
    marker = tmp_path / "pwned"
    key = f"min=0, **{{}}) or {_payload(marker)} or (x"

    class M(nn.Module):
        def forward(self, x):
            return x.clamp(**{key: 0})

    gm = fx.symbolic_trace(M())
    assert not marker.exists()
    assert "**{" in gm.code
    with pytest.raises(TypeError):            # eager: unexpected keyword argument
        M()(tapelab.ones(2))
    with pytest.raises(TypeError):
        gm(tapelab.ones(2))
    assert not marker.exists()


def test_kwargs_that_are_keywords_or_odd_strings_pass_through():
    seen = {}

    def record(x, **kw):
        seen.update(kw)
        return x

    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(record, (x,), {"ok": 1, "class": 2, "a b": 3, "x') or ('": 4}))
    gm = fx.GraphModule(nn.Module(), g)
    gm(tapelab.ones(1))
    assert seen == {"ok": 1, "class": 2, "a b": 3, "x') or ('": 4}


def test_str_subclass_constants_never_use_their_repr(tmp_path):
    marker = tmp_path / "pwned"

    class Evil(str):
        def __repr__(self):
            return _payload(marker)

    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(dict.get, ({Evil("k"): x}, "k")))
    gm = fx.GraphModule(nn.Module(), g)
    assert _payload(marker) not in gm.code
    out = gm(tapelab.ones(1))
    assert out.item() == 1.0
    assert not marker.exists()


def test_bad_node_or_placeholder_names_are_refused(tmp_path):
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_method("relu", (x,))
    g.output(y)
    y.name = f"y = {_payload(tmp_path / 'pwned')}; z"
    with pytest.raises(ValueError, match="not a valid Python identifier"):
        fx.GraphModule(nn.Module(), g)
    g2 = fx.Graph()
    g2.placeholder("x=open('p','w')")
    g2.output(None)
    with pytest.raises(ValueError, match="identifier"):
        g2.python_code("self")
    assert not (tmp_path / "pwned").exists()


def test_get_attr_and_module_paths_with_odd_atoms_are_quoted():
    root = nn.Module()
    inner = nn.Module()
    root.add_module("in", inner)                      # a keyword as a submodule name
    inner.register_buffer("w", tapelab.ones(2))
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.add, (x, g.get_attr("in.w"))))
    gm = fx.GraphModule(root, g)
    assert 'getattr(self, "in").w' in gm.code
    np.testing.assert_array_equal(gm(tapelab.ones(2)).numpy(), [2.0, 2.0])


def _export(gm, folder, name="Exported"):
    gm.to_folder(folder, name)
    sys.path.insert(0, str(folder.parent))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(folder.name)
    finally:
        sys.path.remove(str(folder.parent))
        sys.modules.pop(folder.name, None)
        sys.modules.pop(f"{folder.name}.module", None)


def test_to_folder_with_a_quote_in_the_folder_name(tmp_path):
    tapelab.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    gm = fx.symbolic_trace(model)
    folder = tmp_path / "O'Brien_model"
    # a quote is not legal in a package name, so load module.py by its path
    gm.to_folder(folder, "FxModule")
    spec = importlib.util.spec_from_file_location("obrien_module", folder / "module.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = tapelab.randn(2, 3)
    np.testing.assert_allclose(mod.FxModule()(x).detach().numpy(), gm(x).detach().numpy(), rtol=1e-6)


def test_to_folder_module_name_and_imports_are_validated(tmp_path):
    gm = fx.symbolic_trace(nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match="identifier"):
        gm.to_folder(tmp_path / "bad", "X(tapelab.nn.Module): pass\nimport os\nclass Y")

    def helper(x):
        return x + 1
    helper.__module__ = "os; import sys"
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(helper, (x,)))
    gm2 = fx.GraphModule(nn.Module(), g)
    with pytest.raises(RuntimeError, match="cannot write an import"):
        gm2.to_folder(tmp_path / "bad2", "Exported")


def test_to_folder_refuses_a_layer_whose_repr_is_not_literal(tmp_path):
    class Odd(nn.ReLU):
        pass
    Odd.__module__ = "tapelab.nn.modules.activation"
    Odd.__repr__ = lambda self: "ReLU() or __import__('os')"
    gm = fx.symbolic_trace(nn.Sequential(nn.ReLU()))
    gm.add_submodule("odd", Odd())
    with pytest.raises(RuntimeError, match="cannot rebuild submodule"):
        gm.to_folder(tmp_path / "odd_export", "Exported")


def test_to_folder_plain_name_still_imports(tmp_path):
    tapelab.manual_seed(1)
    gm = fx.symbolic_trace(nn.Sequential(nn.Linear(2, 2), nn.Tanh()))
    mod = _export(gm, tmp_path / "plain_export")
    x = tapelab.randn(3, 2)
    np.testing.assert_allclose(mod.Exported()(x).detach().numpy(), gm(x).detach().numpy(), rtol=1e-6)
