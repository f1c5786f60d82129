"""The eager path's shortcuts keep every semantic: the process-wide summary of grad mode, and
backward's plain loop handing the rest of a walk to the resumable form when someone starts
listening (issue 17)."""
import gc
import threading

import numpy as np
import torch

import tapelab as T
from tapelab.base.grad_mode import GRAD_OFF


def test_grad_off_set_follows_every_writer_and_every_thread():
    assert not GRAD_OFF
    with T.no_grad():
        assert threading.get_ident() in GRAD_OFF
        with T.enable_grad():
            assert not GRAD_OFF and (T.ones(1, requires_grad=True) * 2).requires_grad
        assert not (T.ones(1, requires_grad=True) * 2).requires_grad
    with T.inference_mode():
        assert GRAD_OFF
    assert not GRAD_OFF

    started, release = threading.Event(), threading.Event()
    seen = {}

    def worker():
        T.set_grad_enabled(False)            # and never enabled again: the thread ends with grad off
        started.set()
        release.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    started.wait(10)
    x = T.ones(2, requires_grad=True)
    seen["main records"] = (x * x).requires_grad   # another thread's no_grad does not leak here
    seen["off while alive"] = bool(GRAD_OFF)
    release.set()
    t.join(10)
    gc.collect()
    assert seen == {"main records": True, "off while alive": True}
    assert not GRAD_OFF                      # dropped with the thread's state


def test_a_hook_that_starts_listening_sees_the_rest_of_the_walk():
    """backward() runs a plain loop while nobody listens; a subscription made by a hook mid-walk
    receives the steps after it, as the resumable walk would have emitted them."""
    names = []
    subs = []
    x = T.tensor(np.arange(3.0, dtype=np.float32), requires_grad=True)
    y = (x * 2).exp()

    def start_listening(g):
        subs.append(T.events.subscribe("backward_step", lambda step: names.append(step.name)))
        return g
    y.register_hook(start_listening)
    y.sum().backward()
    subs[0].unsubscribe()
    # the node whose pre-hook subscribed was already running, as in the resumable walk
    assert names == ["MulBackward0", "AccumulateGrad"]
    tx = torch.arange(3.0, requires_grad=True)
    (tx * 2).exp().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
