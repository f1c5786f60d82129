"""``torch.nn.factory_kwargs``: the tensor-factory keywords a layer's constructor passes on."""
from __future__ import annotations

__all__ = ["factory_kwargs"]

_KEYS = ("device", "dtype", "memory_format")


def factory_kwargs(kwargs) -> dict:
    """``device``/``dtype``/``memory_format`` from ``kwargs`` and its ``factory_kwargs`` entry, merged;
    any other key, or one given in both places, is an error, as in PyTorch."""
    if kwargs is None:
        return {}
    simple = set(_KEYS)
    unknown = set(kwargs) - simple - {"factory_kwargs"}
    if unknown:
        raise TypeError(f"unexpected kwargs {unknown}")
    out = {k: kwargs[k] for k in _KEYS if k in kwargs}
    for k, v in (kwargs.get("factory_kwargs") or {}).items():
        if k not in simple:
            raise TypeError(f"unexpected kwargs factory_kwargs[{k!r}]")
        if k in out:
            raise TypeError(f"{k} specified twice, in **kwargs and in factory_kwargs")
        out[k] = v
    return out
