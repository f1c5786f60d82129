"""Threads training and evaluating at once give, bit for bit, what running them one after the
other gives (issue 16, defect 1): 2 and 4 threads, each training its own model and evaluating it
under ``no_grad``/``inference_mode`` between steps, driven in lock step by a barrier so their
ops interleave at every step."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tapelab as T
import tapelab.nn as nn

TIMEOUT = 120


def _job(k: int):
    """Model, optimizer and data of worker ``k``, made in the calling thread (the seed is global)."""
    T.manual_seed(100 + k)
    model = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 3))
    opt = (T.optim.Adam if k % 2 else T.optim.SGD)(model.parameters(), lr=0.05)
    x, y = T.randn(16, 12), T.randint(0, 3, (16,))
    held = T.randn(8, 12)
    return model, opt, x, y, held


def _run(job, steps: int, barrier=None) -> list:
    """Train ``steps`` steps, evaluating after each: the eval outputs and the final weights, as arrays."""
    model, opt, x, y, held = job
    out = []
    for i in range(steps):
        if barrier is not None:
            barrier.wait()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        with (T.no_grad() if i % 2 else T.inference_mode()):
            out.append(model(held).numpy().copy())
        out.append(loss.detach().numpy().copy())
    return out + [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_training_and_evaluation_equal_sequential_runs_bit_for_bit(n, long):
    steps = 200 if long else 12
    sequential = [_run(_job(k), steps) for k in range(n)]
    jobs = [_job(k) for k in range(n)]
    barrier = threading.Barrier(n, timeout=TIMEOUT)
    results: dict = {}
    errors: list = []

    def work(k):
        try:
            results[k] = _run(jobs[k], steps, barrier)
        except BaseException as e:      # reported below, with the thread's traceback
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    if errors:
        raise errors[0]
    for k in range(n):
        assert len(results[k]) == len(sequential[k])
        for a, b in zip(results[k], sequential[k]):
            assert a.dtype == b.dtype and np.array_equal(a, b), f"worker {k} differs from its sequential run"
    assert T.is_grad_enabled() and not T.is_inference_mode_enabled()
