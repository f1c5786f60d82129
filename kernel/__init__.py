"""The kernel side of tapelab in Jupyter: ``%load_ext tapelab.kernel``.

Loading registers the ``%tape``/``%%tape``, ``%%profile``, ``%debug_backward`` and ``%%distributed``
magics, rich display of tensors and ``grad_fn`` nodes, and the comm bridge that streams live tapes to the JupyterLab side panel. The
"Python 3 (tapelab)" kernelspec (``python -m tapelab.kernel install``) loads it by itself.
"""
from __future__ import annotations

__all__ = ["load_ipython_extension", "unload_ipython_extension", "get_bridge"]

_state: dict = {}


def get_bridge():
    """The bridge of this kernel (None before the extension is loaded)."""
    return _state.get("bridge")


def load_ipython_extension(ip) -> None:
    if "bridge" in _state:
        return
    from . import display
    from .bridge import Bridge
    from .magics import TapeMagics

    b = Bridge(ip)
    b.start()
    ip.register_magics(TapeMagics(ip, b))
    from .profiling import ProfileMagics, ProfileStreamer
    b.profiles = ProfileStreamer(b)      # finished profiles -> the panel
    b.profiles.start()
    ip.register_magics(ProfileMagics(ip, b, b.profiles))
    from .debugging import DebugMagics
    ip.register_magics(DebugMagics(ip))   # %debug_backward
    from .distributed import DistributedMagics
    ip.register_magics(DistributedMagics(ip))   # %%distributed -n N: the cell on N MPI ranks
    display.register(ip)
    _state["bridge"] = b
    from . import fx_stream
    fx_stream.install(b)              # traced FX graphs stream to the panel too
    from . import capture_stream
    capture_stream.install(b)         # captured graphs (capture_done) too


def unload_ipython_extension(ip) -> None:
    from . import display

    b = _state.pop("bridge", None)
    from . import fx_stream
    fx_stream.uninstall()
    from . import capture_stream
    capture_stream.uninstall()
    if b is not None:
        if getattr(b, "profiles", None) is not None:
            b.profiles.stop()
        b.stop()
    display.unregister(ip)


def _jupyter_labextension_paths():
    return [{"src": "../../build/labextension", "dest": "tapelab"}]
