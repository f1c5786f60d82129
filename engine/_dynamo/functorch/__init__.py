"""``torch._functorch``: served from here (``aliases._MOVED``); tapelab's function transforms are
``tapelab.func``, and only the settings module that programs set (gpt-fast) lives under this name."""
from . import config  # noqa: F401
