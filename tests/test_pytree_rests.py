"""``tree_map(fn, tree, *rests)`` reads each of ``rests`` up to ``tree``'s structure, as PyTorch's
``TreeSpec.flatten_up_to``: where ``tree`` has a leaf, the rest's whole subtree goes to ``fn`` (Keras 3's
torch backend maps over ``(tensor, (a, b))`` pairs this way); dicts of any standard kind match by keys;
mismatches raise ValueError in PyTorch's words."""
import collections

import pytest
import torch.utils._pytree as tpt

import tapelab.utils._pytree as ours

BOTH = pytest.mark.parametrize("pt", [tpt, ours], ids=["torch", "tapelab"])


@BOTH
def test_a_leaf_takes_the_rests_whole_subtree(pt):
    got = pt.tree_map(lambda a, b: (a, b), [1, 2], [(3, 4), {"k": 5}])
    assert got == [(1, (3, 4)), (2, {"k": 5})]
    assert pt.tree_structure([1, 2]).flatten_up_to([(3, 4), [5]]) == [(3, 4), [5]]


@BOTH
def test_dicts_match_by_keys_in_the_trees_order(pt):
    tree = {"a": 1, "b": 2}
    rest = collections.OrderedDict([("b", 20), ("a", 10)])
    assert pt.tree_map(lambda x, y: x + y, tree, rest) == {"a": 11, "b": 22}
    dd = collections.defaultdict(list, {"b": 200, "a": 100})
    assert pt.tree_map(lambda x, y: x + y, tree, dd) == {"a": 101, "b": 202}
    seen = []
    pt.tree_map_(lambda x, y: seen.append((x, y)), tree, rest)
    assert seen == [(1, 10), (2, 20)]


@pytest.mark.parametrize("tree, rest", [
    ([1, 2], (1, 2)),
    ([1, 2], [1, 2, 3]),
    ({"a": 1}, {"b": 1}),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}),
    ((1, [2]), (1, 2)),
])
def test_mismatches_raise_torchs_error(tree, rest):
    errors = []
    for pt in (tpt, ours):
        with pytest.raises(ValueError) as info:
            pt.tree_map(lambda *xs: xs, tree, rest)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_a_namedtuple_of_another_class_is_refused_as_by_torch():
    A = collections.namedtuple("A", "x y")
    B = collections.namedtuple("B", "x y")
    errors = []
    for pt in (tpt, ours):
        with pytest.raises(ValueError, match="Node context mismatch") as info:
            pt.tree_map(lambda *xs: xs, A(1, 2), B(1, 2))
        errors.append(str(info.value).split(";")[0])
    assert errors[0] == errors[1]


@BOTH
def test_with_path_reads_rests_the_same_way(pt):
    got = pt.tree_map_with_path(lambda path, a, b: (pt.keystr(path), a, b), {"w": 1}, {"w": (2, 3)})
    assert got == {"w": ("['w']", 1, (2, 3))}
