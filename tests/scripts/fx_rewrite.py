"""Trace a module with torch.fx, rewrite call_function targets, recompile and run the graph.

An ordinary torch.fx program: tests/test_pytorch_scripts.py runs it unchanged with the real
torch and with ``torch`` bound to tapelab, and compares every printed line. Weights come from
numpy, so both runs compute the same numbers.
"""
import operator
import zlib

import numpy as np
import torch

# torch.fx by attribute: under ``sys.modules['torch'] = tapelab`` alone, ``import torch.fx``
# would load a second copy of tapelab's modules under torch.* names (reported).
fx = torch.fx
nn = torch.nn
F = torch.nn.functional


def values_for(name, shape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return (rng.uniform(-1, 1, size=shape) / np.sqrt(shape[-1])).astype(np.float32)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 6)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = self.fc2(h) + x
        return F.layer_norm(h, (6,)) * 2.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(6, 4), nn.Tanh())

    def forward(self, x):
        y = self.block(x)
        y = torch.sigmoid(y) - y.mean(dim=-1, keepdim=True)
        return self.head(y).sum(1)


def show(tag, t):
    print(tag, np.round(t.detach().numpy().astype(np.float64), 5).tolist())


def target_name(node):
    t = node.target
    return t if isinstance(t, str) else t.__name__


model = Net()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(values_for(name, tuple(p.shape))))
x = torch.from_numpy(np.linspace(-1.5, 1.5, 18, dtype=np.float32).reshape(3, 6))

gm = fx.symbolic_trace(model)
print("nodes", len(gm.graph.nodes))
print("opcodes", [n.op for n in gm.graph.nodes])
print("names", [n.name for n in gm.graph.nodes])
print("targets", [target_name(n) for n in gm.graph.nodes])
print("users", [len(n.users) for n in gm.graph.nodes])
show("eager", model(x))
show("traced", gm(x))

# relu -> gelu, add -> mul: edit the targets in place, then regenerate forward
for node in gm.graph.nodes:
    if node.op == "call_function" and node.target == torch.relu:
        node.target = F.gelu
    elif node.op == "call_function" and node.target == operator.add:
        node.target = operator.mul
gm.graph.lint()
gm.recompile()
print("rewritten", [target_name(n) for n in gm.graph.nodes if n.op == "call_function"])
show("graph", gm(x))
show("interpreter", fx.Interpreter(gm).run(x))


# insert a node: scale the input of the head by 0.5
head = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target.startswith("head"))
with gm.graph.inserting_before(head):
    half = gm.graph.call_function(operator.mul, (head.args[0], 0.5))
head.replace_input_with(head.args[0], half)
gm.recompile()
print("inserted", len(gm.graph.nodes), half.name, [a.name for a in head.all_input_nodes])
show("halved", gm(x))


# a Transformer that swaps sigmoid for tanh
class SigmoidToTanh(fx.Transformer):
    def call_function(self, target, args, kwargs):
        if target == torch.sigmoid:
            target = torch.tanh
        return super().call_function(target, args, kwargs)


tm = SigmoidToTanh(gm).transform()
print("transformed", [target_name(n) for n in tm.graph.nodes if n.op == "call_function"])
show("tanh", tm(x))


# dead code: an unused node goes away
with gm.graph.inserting_before(head):
    gm.graph.call_function(operator.neg, (half,))
print("before_dce", len(gm.graph.nodes))
print("dce", gm.graph.eliminate_dead_code(), len(gm.graph.nodes))


# replace_pattern on a fresh trace: sigmoid(y) - m  ->  y * m
def pattern(a, b):
    return torch.sigmoid(a) - b


def replacement(a, b):
    return a * b


gm2 = fx.symbolic_trace(model)
matches = fx.replace_pattern(gm2, pattern, replacement)
print("matches", len(matches), len(gm2.graph.nodes))
print("replaced", [target_name(n) for n in gm2.graph.nodes if n.op == "call_function"])
show("pattern", gm2(x))

# gradients flow through the GraphModule into the shared parameters
gm3 = fx.symbolic_trace(model)
gm3(x).sum().backward()
show("grad_fc1", model.block.fc1.weight.grad[:2])
