"""``torch._subclasses``: what libraries import from it to tell tensor subclasses apart (tapelab has none
of PyTorch's fake or functional tensors)."""
