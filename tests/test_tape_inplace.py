"""In-place ops outside autograd while a tape or profiler watches: written straight into the
target (no temporary), told as the op with the same record the temporary's path made."""
from __future__ import annotations

import numpy as np
import torch as pt

import tapelab as torch
from tapelab.base import events


def test_a_watched_inplace_add_writes_in_place_and_is_recorded():
    p = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    g = torch.full((2, 3), 0.5)
    data, uid = p._data, p._uid()
    with torch.tape() as t, torch.no_grad():
        p.add_(g, alpha=-2.0)
        p.mul_(3)
    assert p._data is data                            # the parameter's own memory
    ref = pt.arange(6.0).reshape(2, 3)
    ref.add_(pt.full((2, 3), 0.5), alpha=-2.0).mul_(3)
    np.testing.assert_array_equal(p.detach().numpy(), ref.numpy())
    assert [(r.op, r.shape, r.dtype, r.requires_grad, r.grad_fn) for r in t] == [
        ("add", (2, 3), "float32", False, ""), ("mul", (2, 3), "float32", False, "")]
    add, mul = t.nodes[0], t.nodes[1]
    assert add.inputs == (uid, g._uid())   # target and g: alpha is the one fused op's parameter, as ATen's add
    assert add.output not in (uid, None) and mul.output not in (uid, add.output)  # fresh ids, as before
    assert add.input_shapes == ((2, 3), (2, 3)) and mul.input_shapes == ((2, 3), ())
    assert add.source.endswith("p.add_(g, alpha=-2.0)") and mul.source.endswith("p.mul_(3)")
    assert p._version == 2


def test_an_sgd_step_under_a_tape_matches_torch_and_records_each_update():
    rng = np.random.default_rng(0)
    w0, x0 = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    params = {}
    for m in (torch, pt):
        w = m.tensor(w0.copy(), requires_grad=True)
        opt = m.optim.SGD([w], lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            (m.tensor(x0) @ w.T).square().sum().backward()
            if m is torch:
                with torch.tape() as t:
                    opt.step()
            else:
                opt.step()
        params[m.__name__] = w.detach().numpy()
    np.testing.assert_allclose(params["tapelab"], params["torch"], rtol=1e-5, atol=1e-6)
    assert [r.op for r in t] == ["mul", "add", "add"]   # buf.mul_, buf.add_; p.add_(buf, alpha=-lr): one fused add
    assert all(r.module == "optimizer.step (SGD)" and r.phase == "forward" for r in t)


def test_an_inplace_write_the_ufunc_refuses_still_raises_torchs_error():
    a = torch.ones(2, 3)
    with torch.tape() as t:
        try:
            a.add_(torch.ones(4, 3))
        except RuntimeError as e:
            msg = str(e)
    assert "doesn't match the broadcast shape" in msg or "must match" in msg
    with pt.no_grad():
        try:
            pt.ones(2, 3).add_(pt.ones(4, 3))
        except RuntimeError as e:
            assert type(e) is RuntimeError
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 3), np.float32))


def test_an_op_subscriber_alone_sees_inplace_ops_with_their_duration():
    seen = []
    a = torch.zeros(3)
    with events.subscribe("op", seen.append):
        a.add_(1.0)
    assert [(e.op, e.inputs[0], e.shape, e.tensors[1] is a) for e in seen] == [("add", a._uid(), (3,), True)]
    assert seen[0].duration_ns >= 0 and seen[0].start_ns > 0
    np.testing.assert_array_equal(a.numpy(), [1.0, 1.0, 1.0])
