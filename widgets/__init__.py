"""Notebook widgets for tapelab."""
