"""The default device is per thread, as PyTorch's (a TorchFunctionMode on a thread-local stack):
``set_default_device`` and ``with device(...)`` in one thread leave every other thread on cpu.
Each test runs the same scenario under torch and tapelab and compares the devices seen."""
from __future__ import annotations

import threading

import pytest
import torch

import tapelab


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def _set_in_main_seen_in_thread(m):
    m.set_default_device("meta")
    try:
        other = _in_thread(lambda: (str(m.empty(1).device), str(m.get_default_device())))
        mine = (str(m.empty(1).device), str(m.get_default_device()))
    finally:
        m.set_default_device(None)
    return other, mine


def _set_in_thread_seen_in_main(m):
    def work():
        m.set_default_device("meta")
        return str(m.zeros(2).device)
    inside = _in_thread(work)
    return inside, str(m.zeros(2).device), str(m.get_default_device())


def _with_in_main_seen_in_thread(m):
    with m.device("meta"):
        other = _in_thread(lambda: str(m.ones(1).device))
        mine = str(m.ones(1).device)
    return other, mine, str(m.ones(1).device)


def _two_threads_two_blocks(m):
    """Two threads inside their own ``with device`` blocks at the same time, interleaved by barriers."""
    barrier, seen = threading.Barrier(2), {}

    def work(name, dev):
        with m.device(dev):
            barrier.wait()
            seen[name] = str(m.empty(1).device)
            barrier.wait()
        seen[name + "_after"] = str(m.empty(1).device)

    threads = [threading.Thread(target=work, args=("a", "meta")), threading.Thread(target=work, args=("b", "cpu"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(seen.items())


@pytest.mark.parametrize("scenario", [_set_in_main_seen_in_thread, _set_in_thread_seen_in_main,
                                      _with_in_main_seen_in_thread, _two_threads_two_blocks])
def test_default_device_is_per_thread_like_torch(scenario):
    assert scenario(tapelab) == scenario(torch)


def test_new_thread_builds_modules_on_cpu_while_main_is_on_meta():
    with tapelab.device("meta"):
        weight = _in_thread(lambda: tapelab.nn.Linear(2, 3).weight)
        assert tapelab.nn.Linear(2, 3).weight.is_meta
    assert weight.device.type == "cpu"
    assert weight.shape == (3, 2)
