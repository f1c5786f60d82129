"""``tapelab.utils._pytree`` against ``torch.utils._pytree``: the same leaves, structure and rebuilt
trees; user types registered as nodes; ``utils.hooks.RemovableHandle`` over a library's own dict."""
import collections

import pytest
import torch.utils._pytree as tp

import tapelab
import tapelab.utils._pytree as pt
from tapelab.utils.hooks import RemovableHandle

NT = collections.namedtuple("NT", "x y")
TREES = [5, None, [1, None, (2, {"b": 3, "a": 4})], {"k": NT(1, [2, 3]), "o": collections.OrderedDict(z=5)},
         collections.defaultdict(list, a=[1, 2]), collections.deque([1, (2, 3)], maxlen=4), (), [[], {}],
         {"t": tapelab.ones(2), "n": 3.0}]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_and_unflatten_match_torch(tree):
    leaves, spec = pt.tree_flatten(tree)
    ref_leaves, ref_spec = tp.tree_flatten(tree)
    assert [id(x) for x in leaves] == [id(x) for x in ref_leaves]
    assert spec.num_leaves == ref_spec.num_leaves
    rebuilt = pt.tree_unflatten(list(range(len(leaves))), spec)
    assert rebuilt == tp.tree_unflatten(list(range(len(leaves))), ref_spec)
    assert type(rebuilt) is type(tp.tree_unflatten(list(range(len(leaves))), ref_spec))
    assert pt.tree_structure(tree) == spec and pt.tree_leaves(tree) == leaves


def test_maps_and_predicates_match_torch():
    tree = (1, [2, "s"], {"a": 3.5})
    for p in (pt, tp):
        assert p.tree_map(lambda x: x * 2, tree) == (2, [4, "ss"], {"a": 7.0})
        assert p.tree_map(lambda a, b: (a, b), [1, 2], [3, 4]) == [(1, 3), (2, 4)]
        assert p.tree_map_only(int, lambda x: -x, tree) == (-1, [-2, "s"], {"a": 3.5})
        assert p.tree_all(lambda x: x is not None, tree) and p.tree_any(lambda x: x == "s", tree)
        assert p.tree_any_only(float, lambda x: x > 3, tree) and not p.tree_all_only(int, lambda x: x > 1, tree)
        assert p.tree_map(lambda x: 0, [1, [2]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1) == [0, 0]
    seen = []
    assert pt.tree_map_(seen.append, tree) is tree and seen == [1, 2, "s", 3.5]
    with pytest.raises(ValueError, match="Node arity mismatch"):
        pt.tree_map(lambda a, b: a, [1, 2], [1, 2, 3])
    assert pt.tree_map(lambda a, b: b, [1, 2], [1, [2]]) == [1, [2]]   # a leaf takes the rest's subtree, as torch's
    with pytest.raises(ValueError, match="holds 2 items"):
        pt.tree_unflatten([1], pt.tree_structure([1, 2]))


def test_registered_user_type_is_a_node():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    pt.register_pytree_node(Pair, lambda p: ([p.a, p.b], "ctx"), lambda children, ctx: Pair(*children))
    try:
        out = pt.tree_map(lambda x: x + 1, {"p": Pair(1, [2])})
        assert (out["p"].a, out["p"].b) == (2, [3])
        with pytest.raises(ValueError, match="already registered"):
            pt.register_pytree_node(Pair, lambda p: ([], None), lambda c, x: None)
    finally:
        pt.SUPPORTED_NODES.pop(Pair)


def test_func_transforms_read_arguments_as_pytrees():
    g = tapelab.func.grad(lambda p: (p["w"] * p["nt"].x).sum())({"w": tapelab.ones(2), "nt": NT(tapelab.full((2,), 3.0), 0)})
    assert g["w"].tolist() == [3.0, 3.0] and isinstance(g["nt"], NT)


def test_removable_handle_over_a_library_dict():
    hooks = {}
    extra = {}
    h = RemovableHandle(hooks, extra_dict=extra)
    hooks[h.id], extra[h.id] = "hook", "more"
    with h:
        assert h.id in hooks
    assert not hooks and not extra
    assert isinstance(tapelab.nn.Linear(1, 1).register_forward_hook(lambda *a: None), RemovableHandle)
