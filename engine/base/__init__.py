"""The base layer: what every other layer stands on, knowing no Tensor.

dtypes, devices and their array namespaces (numpy, cupy, the simulated cuda and the meta
device), the runtime and allocator settings, tensor printing, events, and the process-wide
state the dispatcher and autograd read on every op (the mode stack, grad mode).
Nothing here imports anything else of tapelab above ``base``.
"""
