"""``torch._inductor``: served from here (``aliases._MOVED``) because tapelab's compiler is not inductor;
only its settings module exists, so that programs that tune inductor (gpt-fast) run unchanged."""
from . import config  # noqa: F401
