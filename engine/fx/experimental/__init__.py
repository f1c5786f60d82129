"""``torch.fx.experimental``."""
