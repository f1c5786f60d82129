import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true",
                     help="run the full stress suite (tests/stress) and the empty-cache compile checks; by default "
                          "a short version")
    parser.addoption("--update-docs", action="store_true",
                     help="rewrite pages the tests generate (docs/bad-inputs.md) instead of failing when stale")
    parser.addoption("--shuffle", type=int, default=None, metavar="SEED",
                     help="run the collected tests in an order shuffled with SEED (proves order freedom)")
    parser.addoption("--reverse", action="store_true", help="run the collected tests in reverse order")


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("--shuffle")
    if seed is not None:
        random.Random(seed).shuffle(items)
    if config.getoption("--reverse"):
        items.reverse()


def pytest_report_header(config):
    seed = config.getoption("--shuffle")
    return [f"tests shuffled with seed {seed}"] if seed is not None else []


@pytest.fixture(params=[True, False], ids=["loops", "numpy"])
def loops(request):
    """Each test twice: with the eager kernels' numba loops on, and on the plain numpy path."""
    from tapelab import kernels
    kernels.set_enabled(request.param)
    return request.param


@pytest.fixture(autouse=True)
def _restore_thread_counts():
    """Each test ends at the intra-op thread counts it began with, tapelab's and torch's, so a test
    may set them freely. Only a library already imported is read: many test processes never load
    torch, and importing it here would."""
    libs = [lib for lib in map(sys.modules.get, ("tapelab", "torch")) if lib is not None]
    counts = [lib.get_num_threads() for lib in libs]
    yield
    for lib, n in zip(libs, counts):
        if lib.get_num_threads() != n:
            lib.set_num_threads(n)


@pytest.fixture(autouse=True)
def _restore_eager_loops_switch():
    """Each test ends with the eager kernels' loops switched as it began (``kernels.set_enabled``), so
    a test may switch them freely; read only where tapelab's kernels are already imported."""
    switch = sys.modules.get("tapelab.kernels.switch")
    was = switch is not None and switch.enabled()
    yield
    if switch is not None and switch.enabled() != was:
        switch.set_enabled(was)


@pytest.fixture(autouse=True)
def _collect_dead_subclasses():
    """A Tensor subclass a test defined keeps every op on the slow path until the collector frees its
    class (classes sit in reference cycles); collect after such a test, so the next one starts on the
    eager fast path whatever the order (``--shuffle``)."""
    yield
    state = sys.modules.get("tapelab.base.dispatch_state")
    if state is not None and state.STATE.functions is not None:
        import gc
        gc.collect()


@pytest.fixture
def stem_forward_calls(monkeypatch):
    """The image ranges ``kernels/conv.py``'s direct stem forward (``forward_stride1``) ran on, one entry a
    call: empty where a convolution took another route (im2col)."""
    from tapelab import kernels
    loops = kernels.loops("conv")
    real, calls = loops.forward_stride1, []
    monkeypatch.setattr(loops, "forward_stride1", lambda *args: calls.append(args[-2:]) or real(*args))
    return calls


@pytest.fixture
def subscription_changes():
    """How many times the dispatcher was told that event subscriptions changed (``events.on_change``)."""
    from tapelab.base import events
    told = []

    def count():
        told.append(1)
    events.on_change(count)
    try:
        yield told
    finally:
        events._on_change.remove(count)


@pytest.fixture
def empty_cache_compiles(request):
    """For a test that compiles numba's kernels in an empty cache (a subprocess, 15-60 s on the CI machine):
    it runs with ``--long``; ``pytest tests`` (CI) skips it, as the stress suite runs short there."""
    if not request.config.getoption("--long"):
        pytest.skip("compiles numba's kernels in an empty cache (15-60 s): run with --long")
