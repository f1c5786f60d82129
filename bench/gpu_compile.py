"""``tapelab.compile`` on a GPU: fused cupy kernels against eager, then the compiled step captured.

Run as a section of ``bench/gpu_check.py`` (``--compile`` runs it alone). For each model of
``COMPILED`` it trains the same seeded model eagerly and compiled (``tapelab.compile``) for a few
SGD-momentum steps on ``dev`` and compares losses and final weights; counts the fused kernels one
compiled step runs (profiler events named ``fused(...)``); captures the compiled step into one
``tapelab.graphs.Graph``; and times eager, compiled, compiled-and-captured and PyTorch CUDA eager.
Issue 18's goals: compiled >= 1.5x eager on the elementwise-heavy rows, a captured step one
graph launch, >= 3x PyTorch CUDA eager.
"""
from __future__ import annotations

import numpy as np

import tapelab
from gpu_models import MODELS, _data, _max_diff, _median_step_ms, _setup, _torch_cuda, sgd_step
from opdb.ondevice import host

COMPILED = ("GELU MLP 784-1024-1024-10, batch 64", "Transformer block d128, batch 8x64",
            "GPT block d128 (pre-norm, GELU), batch 8x64")


def _feed(m, name, built, seed, dev):
    """Step ``seed``'s batch of model ``name`` into ``built``'s static input and target."""
    _, shape, classes = MODELS[name]
    x_np, y_np = _data(shape, classes, seed=seed)
    _, x, y, _ = built
    with m.no_grad():
        x.copy_(m.tensor(x_np).to(dev))
        y.copy_(m.tensor(y_np).to(dev))


def _fused_events(step) -> int:
    """How many fused kernels one call of ``step`` runs, read from the profiler's events."""
    with tapelab.profiler.profile() as prof:
        step()
    return sum(e.count for e in prof.key_averages() if e.key.startswith("fused("))


def compiled_row(name: str, dev, torch, steps: int = 5, time_it: bool = True):
    """(name, ok, detail, times{eager, compiled, captured, torch} ms) for one model."""
    eager = _setup(tapelab, name, dev)
    comp = _setup(tapelab, name, dev)
    compiled = tapelab.compile(comp[0])
    e_step, c_step = sgd_step(tapelab, eager), sgd_step(tapelab, comp, compiled)
    e_loss, c_loss = [], []
    for i in range(steps):
        _feed(tapelab, name, eager, i, dev)
        _feed(tapelab, name, comp, i, dev)
        e_loss.append(float(e_step().item()))
        c_loss.append(float(c_step().item()))
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-4, atol=1e-5, err_msg="compiled losses vs eager")
    e_w = {k: host(v) for k, v in eager[0].state_dict().items()}
    c_w = {k: host(v) for k, v in comp[0].state_dict().items()}
    worst = max(_max_diff(c_w[k], e_w[k]) for k in e_w)
    fused = _fused_events(c_step)
    g = tapelab.graphs.Graph(dev)
    opt = comp[3]
    opt.zero_grad(set_to_none=True)
    with tapelab.graphs.graph(g):
        static = tapelab.nn.functional.cross_entropy(compiled(comp[1]), comp[2])
        static.backward()
        opt.step()
    one = g.stream_captured and g.cuda_graphs == 1 and not g.eager_steps
    ok = worst <= 1e-4 and (one or dev.type != "cuda")
    detail = (f"{steps} steps, losses {e_loss[0]:.4f} -> {e_loss[-1]:.4f} equal to eager, max |dw| {worst:.1e}; "
              f"{fused} fused kernels a step; captured: {g.cuda_graphs} CUDA graph(s), {g.eager_steps} eager steps")
    times = {}
    if time_it:
        sync = tapelab.cuda.synchronize
        times["eager"] = _median_step_ms(e_step, sync)
        times["compiled"] = _median_step_ms(c_step, sync)
        times["captured"] = _median_step_ms(g.replay, sync)
        if torch is not None:
            built = _setup(torch, name, "cuda")
            times["torch"] = _median_step_ms(sgd_step(torch, built), torch.cuda.synchronize)
    return name, ok, detail, times


def report_compiled(dev, pattern: str = "", time_it: bool = True) -> bool:
    """Print each ``COMPILED`` model's row and timings; True when all passed."""
    torch = _torch_cuda()
    rows = []
    for name in COMPILED:
        if pattern and pattern.lower() not in name.lower():
            continue
        try:
            rows.append(compiled_row(name, dev, torch, time_it=time_it))
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
            rows.append((name, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300], {}))
    print(f"\n== tapelab.compile on {dev}: fused kernels against eager, then captured")
    for name, good, detail, _ in rows:
        print(f"  {'ok  ' if good else 'FAIL'} {name:40s} {detail}")
    if time_it:
        print(f"  {'median of 20 (ms)':40s} {'eager':>8s} {'compiled':>9s} {'captured':>9s} {'torch':>8s}"
              f" {'eager/comp':>10s} {'torch/capt':>10s}")
        for name, _, _, t in rows:
            if not t:
                continue
            tt = t.get("torch")
            print(f"  {name:40s} {t['eager']:8.3f} {t['compiled']:9.3f} {t['captured']:9.3f} "
                  f"{tt if tt else float('nan'):8.3f} {t['eager'] / t['compiled']:10.2f} "
                  f"{(tt or float('nan')) / t['captured']:10.2f}")
    return all(r[1] for r in rows)
