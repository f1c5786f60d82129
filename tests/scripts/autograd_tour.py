"""An ordinary PyTorch autograd script. tests/test_pytorch_scripts.py runs it unchanged
twice, once with the real torch and once with ``torch`` bound to tapelab, and compares
every printed number."""
import torch


def show(name, value):
    if isinstance(value, torch.Tensor):
        value = value.detach().tolist()
    print(name, value)


torch.manual_seed(0)
x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], requires_grad=True)
w = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
b = torch.tensor(0.5, requires_grad=True)

# broadcasting and elementwise math
y = (x * w + b).tanh() + x.exp() / (1 + x ** 2)
show("y", y)

# reductions
show("sum", y.sum())
show("mean_dim", y.mean(dim=0))
show("max", y.max(dim=1).values)
show("std", y.std(dim=1))
show("logsumexp", torch.logsumexp(y, dim=1))

# indexing
show("row", y[1])
show("col", y[:, 2])
show("mask", y[y > 0.5])
show("fancy", y[[0, 1, 1], [2, 0, 1]])

# backward with hooks
seen = []
h = y.register_hook(lambda g: seen.append(g.sum().item()))
loss = (y[:, 1:] ** 2).sum() + y.mean()
loss.backward(retain_graph=True)
show("loss", loss)
show("x.grad", x.grad)
show("w.grad", w.grad)
show("b.grad", b.grad)
show("hook", seen)
h.remove()

# accumulation
loss.backward()
show("x.grad2", x.grad)

# a custom Function


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        ctx.save_for_backward(inp)
        return inp ** 3

    @staticmethod
    def backward(ctx, grad):
        (inp,) = ctx.saved_tensors
        return grad * 3 * inp ** 2


z = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
c = Cube.apply(z).sum()
c.backward()
show("cube_grad", z.grad)

# double backward: gradient of a gradient
u = torch.tensor([0.3, -0.7, 1.1], requires_grad=True)
f = (u.sin() * u ** 2).sum()
(g,) = torch.autograd.grad(f, u, create_graph=True)
show("g", g)
(gg,) = torch.autograd.grad(g.sum(), u)
show("gg", gg)

# matmul, softmax-style composite, no_grad
a = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 1.0], [0.0, 0.0, 1.0], [2.0, 1.0, -1.0]])
m = torch.tensor([[0.2, -0.1], [0.4, 0.3], [-0.5, 0.1]], requires_grad=True)
logits = a @ m
p = logits.exp() / logits.exp().sum(dim=1, keepdim=True)
nll = -(p[torch.arange(4), torch.tensor([0, 1, 1, 0])]).log().mean()
nll.backward()
show("nll", nll)
show("m.grad", m.grad)
with torch.no_grad():
    m -= 0.1 * m.grad
show("m", m)
show("requires_grad", m.requires_grad)
