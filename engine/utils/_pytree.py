"""``torch.utils._pytree``: nested containers (tuples, lists, dicts, namedtuples, ...) flattened
to their leaves and rebuilt from new ones. ``torch.func`` reads arguments with it, and libraries
(EMA helpers, accelerate, Hugging Face) map functions over model outputs and states with it;
``register_pytree_node`` makes a user type a container too."""
from __future__ import annotations

import collections
import dataclasses
import warnings
from typing import Any, Callable, NamedTuple

__all__ = ["TreeSpec", "LeafSpec", "treespec_leaf", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any", "tree_all_only",
           "tree_any_only", "register_pytree_node", "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance",
           "is_structseq", "is_structseq_class", "is_structseq_instance", "SUPPORTED_NODES", "SequenceKey", "MappingKey",
           "GetAttrKey", "KeyEntry", "KeyPath", "Context", "tree_flatten_with_path", "tree_leaves_with_path",
           "tree_map_with_path", "keystr"]


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable      # node -> (children, context)
    unflatten_fn: Callable    # (children, context) -> node
    flatten_with_keys_fn: Callable | None = None   # node -> ([(key, child), ...], context)


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A child's position in a tuple or list, in a key path."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    """A child's key in a dict, in a key path."""
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """A child's attribute name (a namedtuple field), in a key path."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


KeyEntry = Any          # SequenceKey, MappingKey, GetAttrKey or a user type with ``get``
KeyPath = tuple         # of KeyEntry
Context = Any           # what flatten_fn returns beside the children, for unflatten_fn


PyTree = Any           # any nested container of leaves (the annotation libraries import)
SUPPORTED_NODES: dict[type, NodeDef] = {}


def register_pytree_node(cls: type, flatten_fn: Callable, unflatten_fn: Callable, *,
                         serialized_type_name: str | None = None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    """Make ``cls`` a container: ``flatten_fn(node) -> (children, context)`` and
    ``unflatten_fn(children, context) -> node``."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


_register_pytree_node = register_pytree_node      # the older private name libraries still call


# The built-in containers' functions under PyTorch's private names, which libraries register their own
# types with (norse's state namedtuples: ``register_pytree_node(cls, _namedtuple_flatten, _namedtuple_unflatten)``).
def _seq_flatten(seq):
    return list(seq), None


def _seq_flatten_with_keys(seq):
    return [(SequenceKey(i), v) for i, v in enumerate(seq)], None


def _tuple_unflatten(values, context) -> tuple:
    return tuple(values)


def _list_unflatten(values, context) -> list:
    return list(values)


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_flatten_with_keys(d):
    """``_dict_flatten`` with each child paired with its ``MappingKey``."""
    values, keys = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(keys, values)], keys


def _dict_unflatten(values, context) -> dict:
    return dict(zip(context, values))


def _namedtuple_flatten(d):
    return list(d), type(d)


def _namedtuple_flatten_with_keys(d):
    return [(GetAttrKey(f), v) for f, v in zip(type(d)._fields, d)], type(d)


def _namedtuple_unflatten(values, context):
    return context(*values)


def _ordereddict_unflatten(values, context) -> collections.OrderedDict:
    return collections.OrderedDict(zip(context, values))


def _defaultdict_flatten(d):
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_flatten_with_keys(d):
    return _dict_flatten_with_keys(d)[0], [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values, context) -> collections.defaultdict:
    return collections.defaultdict(context[0], zip(context[1], values))


def _deque_flatten(d):
    return list(d), d.maxlen


def _deque_flatten_with_keys(d):
    return _seq_flatten_with_keys(d)[0], d.maxlen


def _deque_unflatten(values, context) -> collections.deque:
    return collections.deque(values, maxlen=context)


_tuple_flatten = _list_flatten = _seq_flatten
_tuple_flatten_with_keys = _list_flatten_with_keys = _seq_flatten_with_keys
_ordereddict_flatten, _ordereddict_flatten_with_keys = _dict_flatten, _dict_flatten_with_keys
register_pytree_node(tuple, _tuple_flatten, _tuple_unflatten, flatten_with_keys_fn=_tuple_flatten_with_keys)
register_pytree_node(list, _list_flatten, _list_unflatten, flatten_with_keys_fn=_list_flatten_with_keys)
register_pytree_node(dict, _dict_flatten, _dict_unflatten, flatten_with_keys_fn=_dict_flatten_with_keys)
# every namedtuple class is one node type, keyed by ``collections.namedtuple`` as in PyTorch's registry
register_pytree_node(collections.namedtuple, _namedtuple_flatten, _namedtuple_unflatten,
                     flatten_with_keys_fn=_namedtuple_flatten_with_keys)
register_pytree_node(collections.OrderedDict, _ordereddict_flatten, _ordereddict_unflatten,
                     flatten_with_keys_fn=_ordereddict_flatten_with_keys)
register_pytree_node(collections.defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                     flatten_with_keys_fn=_defaultdict_flatten_with_keys)
register_pytree_node(collections.deque, _deque_flatten, _deque_unflatten, flatten_with_keys_fn=_deque_flatten_with_keys)
_BUILTIN = frozenset(SUPPORTED_NODES)   # the containers registered here (a user's must match exactly)


def is_namedtuple_class(cls) -> bool:
    """A namedtuple class: a tuple subclass with string ``_fields``, ``_make`` and ``_asdict``."""
    return (isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(f) is str for f in cls._fields) and callable(getattr(cls, "_make", None))
            and callable(getattr(cls, "_asdict", None)))


def is_namedtuple_instance(obj) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    """A namedtuple instance or class."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


_BASETYPE = 1 << 10   # CPython's Py_TPFLAGS_BASETYPE: the type may be subclassed


def is_structseq_class(cls) -> bool:
    """A C struct sequence type (``os.stat_result``): a final, direct tuple subclass with the three field
    counts. tapelab's ``return_types`` are namedtuples, not struct sequences (tensordict rebuilds either)."""
    return (isinstance(cls, type) and cls.__bases__ == (tuple,)
            and all(isinstance(getattr(cls, a, None), int) for a in ("n_fields", "n_sequence_fields", "n_unnamed_fields"))
            and not cls.__flags__ & _BASETYPE)


def is_structseq_instance(obj) -> bool:
    return is_structseq_class(type(obj))


def is_structseq(obj) -> bool:
    """A struct sequence instance or class."""
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def _node_type(tree) -> type | None:
    cls = type(tree)
    if cls in SUPPORTED_NODES:
        return cls
    if is_namedtuple(cls):
        return collections.namedtuple    # the registry's key for every namedtuple class
    return None


def _get_node_type(tree) -> Any:
    """PyTorch's: ``namedtuple`` for a namedtuple instance, else the tree's own type (a container exactly
    when ``SUPPORTED_NODES`` holds it; Lightning walks trees with it)."""
    return collections.namedtuple if is_namedtuple(type(tree)) else type(tree)


class TreeSpec:
    """A tree's shape: its node type, the context to rebuild it (keys, a class), its children's specs."""

    def __init__(self, type: Any, context: Any, children_specs: list):
        self.type, self.context, self.children_specs = type, context, children_specs
        self.num_leaves = sum(c.num_leaves for c in children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in children_specs)
        self.num_children = len(children_specs)

    def is_leaf(self) -> bool:
        return False

    def __eq__(self, other) -> bool:
        return (isinstance(other, TreeSpec) and other.is_leaf() == self.is_leaf() and self.type == other.type
                and self.context == other.context and self.children_specs == other.children_specs)

    def __hash__(self):
        return hash((self.type, repr(self.context), tuple(self.children_specs)))

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of ``tree`` where this spec has its leaves (a leaf here takes a whole subtree
        there): how ``tree_map`` reads its ``rests``. Mismatched containers raise ValueError in PyTorch's
        words; dict types mix freely, keys compared as sets and read in this spec's order."""
        subtrees: list = []
        _up_to(self, tree, subtrees)
        return subtrees

    def __repr__(self) -> str:
        name = "namedtuple" if self.type is collections.namedtuple else getattr(self.type, "__name__", self.type)
        return f"TreeSpec({name}, {self.context!r}, [{', '.join(map(repr, self.children_specs))}])"


_LEAF_SPEC_DEPRECATED = ("`isinstance(treespec, LeafSpec)` is deprecated, "
                         "use `isinstance(treespec, TreeSpec) and treespec.is_leaf()` instead.")


class LeafSpec(TreeSpec):
    """A leaf's spec. Deprecated as PyTorch's is: making one warns (FutureWarning, PyTorch's words);
    the trees here share the one ``treespec_leaf()`` returns."""

    def __new__(cls, *args, **kwargs):
        warnings.warn(_LEAF_SPEC_DEPRECATED, FutureWarning, stacklevel=2)
        return super().__new__(cls)

    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves, self.num_nodes = 1, 1

    def is_leaf(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "*"


with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    _LEAF_SPEC = LeafSpec()


def treespec_leaf() -> LeafSpec:
    """The spec of a leaf (every leaf shares it), PyTorch's replacement for ``LeafSpec()``."""
    return _LEAF_SPEC


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeSpec]:
    """``(leaves, spec)``: the leaves in order (dicts in insertion order) and the tree's shape."""
    leaves: list = []

    def walk(node) -> TreeSpec:
        kind = None if is_leaf is not None and is_leaf(node) else _node_type(node)
        if kind is None:
            leaves.append(node)
            return _LEAF_SPEC
        children, context = SUPPORTED_NODES[kind].flatten_fn(node)
        return TreeSpec(kind, context, [walk(c) for c in children])
    spec = walk(tree)
    return leaves, spec


def _keyed_children(node, kind) -> list:
    """``[(key, child), ...]`` of a container node, for the ``*_with_path`` functions."""
    entry = SUPPORTED_NODES[kind]
    if entry.flatten_with_keys_fn is not None:
        return entry.flatten_with_keys_fn(node)[0]
    raise ValueError(f"Did not find a flatten_with_keys_fn for type: {kind}. Please pass a flatten_with_keys_fn "
                     f"argument to register_pytree_node.")


def tree_flatten_with_path(tree, is_leaf: Callable | None = None) -> tuple[list, TreeSpec]:
    """``([(key_path, leaf), ...], spec)``: ``tree_flatten`` with each leaf's path of keys from the root."""
    pairs: list = []

    def walk(node, path: tuple) -> None:
        kind = None if is_leaf is not None and is_leaf(node) else _node_type(node)
        if kind is None:
            pairs.append((path, node))
            return
        for key, child in _keyed_children(node, kind):
            walk(child, path + (key,))
    walk(tree, ())
    return pairs, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """``tree_map`` whose ``func`` also receives each leaf's key path first."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(path, leaf, *xs) for (path, leaf), *xs in zip(pairs, *others)], spec)


def keystr(kp: tuple) -> str:
    """A key path as text, e.g. ``[0]['a'].b``."""
    return "".join(str(k) for k in kp)


def tree_unflatten(leaves, treespec: TreeSpec):
    """The tree of ``treespec``'s shape holding ``leaves``."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a "
                         f"pytree that holds {treespec.num_leaves} items ({treespec}).")
    it = iter(leaves)

    def build(spec: TreeSpec):
        if spec.is_leaf():
            return next(it)
        return SUPPORTED_NODES[spec.type].unflatten_fn([build(c) for c in spec.children_specs], spec.context)
    return build(treespec)


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf: Callable | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """``func`` over the leaves of ``tree`` and, beside each, what ``rests`` hold at that place (a whole
    subtree where ``tree`` has a leaf: ``TreeSpec.flatten_up_to``)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def _up_to(spec: TreeSpec, node, subtrees: list) -> None:
    if spec.is_leaf():
        subtrees.append(node)
        return
    kind = _get_node_type(node)
    if spec.type not in _BUILTIN:   # a registered type must match exactly
        if kind != spec.type:
            raise ValueError(f"Type mismatch; expected {spec.type!r}, but got {kind!r}.")
        children, context = SUPPORTED_NODES[kind].flatten_fn(node)
        if len(children) != spec.num_children:
            raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}.")
        if context != spec.context:
            raise ValueError(f"Node context mismatch for custom node type {spec.type!r}.")
    else:
        dicts = spec.type in _DICTS and kind in _DICTS
        if not dicts and kind != spec.type:
            raise ValueError(f"Node type mismatch; expected {spec.type!r}, but got {kind!r}.")
        if len(node) != spec.num_children:
            raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got {len(node)}.")
        if dicts:
            keys = spec.context if spec.type is not collections.defaultdict else spec.context[1]
            got, expected = set(node), set(keys)
            if got != expected:
                missing, extra = expected - got, got - expected
                raise ValueError("Node keys mismatch" + (f"; missing key(s): {missing}" if missing else "")
                                 + (f"; extra key(s): {extra}" if extra else "") + ".")
            children = [node[k] for k in keys]
        else:
            children, context = SUPPORTED_NODES[kind].flatten_fn(node)
            if kind is not collections.deque and context != spec.context:
                raise ValueError(f"Node context mismatch for node type {spec.type!r}; expected {spec.context!r}, "
                                 f"but got {context!r}.")
    for child, child_spec in zip(children, spec.children_specs):
        _up_to(child_spec, child, subtrees)


def tree_map_(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """``func`` over the leaves for its effect (in-place updates); returns ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _only(types, func: Callable) -> Callable:
    return lambda x: func(x) if isinstance(x, types) else x


def tree_map_only(type_or_types, func: Callable, tree, is_leaf: Callable | None = None):
    """``tree_map`` applying ``func`` only to leaves of the given type(s)."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func: Callable, tree, is_leaf: Callable | None = None):
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return any(map(pred, tree_leaves(tree, is_leaf)))


def tree_all_only(type_or_types, pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, type_or_types))
