"""``torch.nn.modules.utils``: the argument normalisers layers and libraries import from it
(kornia's ``_pair``, DDP checkpoints' ``consume_prefix_in_state_dict_if_present``)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A function giving an iterable as a tuple and repeating anything else ``n`` times."""
    def parse(x) -> tuple:
        return tuple(x) if isinstance(x, Iterable) else (x,) * n
    parse.__name__ = name
    return parse


_single, _pair, _triple, _quadruple = (_ntuple(n, f"_{w}") for n, w in
                                       ((1, "single"), (2, "pair"), (3, "triple"), (4, "quadruple")))


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """``t`` reversed, each element ``n`` times: a conv's padding as ``F.pad`` wants it."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults: list) -> Any:
    """An adaptive pool's output size with its ``None`` entries taken from the input's trailing sizes."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [d if v is None else v for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys that start with it (and from the state dict's ``_metadata``), in place."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    for key in [k for k in metadata if k.startswith(prefix) or k == prefix.rstrip(".")]:
        metadata[key[len(prefix):] if key.startswith(prefix) else ""] = metadata.pop(key)
