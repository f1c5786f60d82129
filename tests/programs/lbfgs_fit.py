"""Curve fitting with L-BFGS, in the style of scientific fitting scripts: a small tanh MLP in
float64 fitted to a damped oscillation with ``optim.LBFGS`` and a closure (strong-Wolfe line
search, or fixed steps), then a physical parameter fit (``nn.Parameter`` scalars, a model
written as a function) with the same optimizer."""
from __future__ import annotations

import numpy as np

from ._common import seed_weights


def main(torch, steps: int = 4, line_search_fn: str | None = "strong_wolfe"):
    nn = torch.nn

    rng = np.random.default_rng(29)
    x_np = np.linspace(-2.0, 2.0, 64)[:, None]
    y_np = np.exp(-0.5 * x_np) * np.sin(3.0 * x_np) + 0.02 * rng.standard_normal(x_np.shape)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).double()
    seed_weights(torch, model, seed=19)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1 if line_search_fn else 0.5, max_iter=10,
                                  history_size=8, line_search_fn=line_search_fn)

    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    history = []
    for _ in range(steps):
        loss = optimizer.step(closure)
        history.append(loss.item())
    history.append(optimizer.state[optimizer.param_groups[0]["params"][0]]["func_evals"])

    # a parametric fit: amplitude, decay, frequency, phase
    params = nn.ParameterDict({k: nn.Parameter(torch.tensor(v, dtype=torch.float64))
                               for k, v in dict(amp=0.8, decay=0.3, freq=2.7, phase=0.1).items()})
    fit = torch.optim.LBFGS(params.values(), max_iter=20, line_search_fn="strong_wolfe")

    def damped(t):
        return params["amp"] * torch.exp(-params["decay"] * t) * torch.sin(params["freq"] * t + params["phase"])

    def closure2():
        fit.zero_grad()
        loss = ((damped(x) - y) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(steps):
        history.append(fit.step(closure2).item())
    history += [p.item() for p in params.values()]
    return history
