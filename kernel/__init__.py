"""The kernel side of tapelab in Jupyter."""
