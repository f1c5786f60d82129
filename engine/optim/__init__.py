"""Optimizers and learning-rate schedulers (torch.optim)."""
