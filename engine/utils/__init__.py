"""Utilities (torch.utils)."""
