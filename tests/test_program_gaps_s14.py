"""Gaps that researchers' programs and libraries met in session 14, each against PyTorch itself."""
import warnings

import tapelab


def _caught(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        value = fn()
    return value, [(w.category, str(w.message)) for w in seen]


def test_making_a_leafspec_warns_as_pytorchs_and_flattening_does_not():
    """PyTorch Lightning's ``_tree_flatten`` makes ``LeafSpec()``: torch 2.13 warns FutureWarning
    there, and the printed line is part of a training run's output; its own flattening uses the
    one shared leaf spec and stays quiet."""
    import torch.utils._pytree as theirs

    import tapelab.utils._pytree as ours
    _, want = _caught(theirs.LeafSpec)
    got_spec, got = _caught(ours.LeafSpec)
    assert want and got == want and got_spec.is_leaf()
    tree = {"a": [1, (2, 3)], "b": 4}
    (leaves, spec), quiet = _caught(lambda: ours.tree_flatten(tree))
    assert quiet == [] and leaves == theirs.tree_flatten(tree)[0] == [1, 2, 3, 4]
    assert ours.tree_unflatten(leaves, spec) == tree
    assert ours.treespec_leaf() is ours.treespec_leaf() and ours.treespec_leaf().is_leaf()
    assert theirs.treespec_leaf().is_leaf()


def test_a_compiled_function_has_code_as_torch_compiles_result_does():
    """Lightning's ``validate`` after ``fit`` on a ``torch.compile``d LightningModule compiles the
    already compiled step methods again, then ``is_overridden`` unwraps one ``__wrapped__`` and
    reads ``__code__``: torch compiles the original function again, and what it returns is a
    Python function, with a ``__code__`` of its own."""
    import torch

    def step(x):
        return x + 1

    def overridden(attr, parent):       # lightning_utilities' is_overridden, in short
        attr = getattr(attr, "__wrapped__", attr)
        return attr.__code__ != parent.__code__

    for lib in (torch, tapelab):
        twice = lib.compile(lib.compile(step))
        assert twice.__wrapped__ is step and twice.__code__ is not step.__code__
        assert not overridden(twice, step) and not overridden(lib.compile(step), step)
    assert float(tapelab.compile(tapelab.compile(step))(tapelab.tensor(1.0))) == 2.0
