"""``torch.utils._config_module``: settings modules with a fixed set of names (``torch._inductor.config``,
``torch._functorch.config``). Programs set them at import time (gpt-fast's
``torch._inductor.config.coordinate_descent_tuning = True``); a name the module does not declare raises
PyTorch's ``AttributeError`` instead of being stored and ignored, so a mistyped setting fails loudly."""
from __future__ import annotations

import sys
from types import ModuleType


def _refuse(path: str, name: str) -> AttributeError:
    return AttributeError(f"{path}.{name} does not exist")


class ConfigSection:
    """A nested group of settings (``config.triton``), declared in the module as a class."""

    def __init__(self, path: str, declared: type) -> None:
        object.__setattr__(self, "_path", path)
        for name, value in vars(declared).items():
            if not name.startswith("__"):
                object.__setattr__(self, name, _settings(f"{path}.{name}", value))

    def __getattr__(self, name: str):
        raise _refuse(self._path, name)

    def __setattr__(self, name: str, value) -> None:
        if name not in self.__dict__:
            raise _refuse(self._path, name)
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<config section {self._path}>"


class ConfigModule(ModuleType):
    """The settings module itself: its declared names are read and set as attributes, others refused."""

    _path: str

    def __getattr__(self, name: str):
        raise _refuse(self._path, name)

    def __setattr__(self, name: str, value) -> None:
        if name not in self.__dict__:
            raise _refuse(self._path, name)
        super().__setattr__(name, value)


def _settings(path: str, value):
    return ConfigSection(path, value) if isinstance(value, type) else value


def install_config_module(name: str, path: str) -> None:
    """Turn module ``name``'s classes into sections and fix its names (call at the end of the module);
    ``path`` is the name errors give, PyTorch's (``torch._inductor.config``)."""
    module = sys.modules[name]
    for attr, value in list(vars(module).items()):
        if isinstance(value, type) and not attr.startswith("_"):
            setattr(module, attr, ConfigSection(f"{path}.{attr}", value))
    module._path = path
    module.__class__ = ConfigModule
