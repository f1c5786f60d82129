"""The core layer: Tensor (data and metadata), the autograd graph's nodes, the op registry,
the factory and random ops, and the dispatcher every op passes, bottom to top:
``tensor`` -> ``node`` -> ``registry`` -> ``factories`` -> ``dispatch`` -> ``random`` -> ``creation``.
It stands on ``base`` alone; everything else stands on it.
"""
