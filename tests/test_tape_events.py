"""The tape and the event bus: what is recorded, how it links forward to backward, and
that recording costs nothing (the dispatcher's slow flag) when nobody listens."""
import gc
import json

import numpy as np
import pytest

import tapelab as tl
from tapelab import dispatch, events
from tapelab.tape import TapeNode, sample, summarize, summarize_samples


def leaf(*shape, seed=0):
    arr = np.random.default_rng(seed).standard_normal(shape)
    return tl.tensor(arr, requires_grad=True)


def test_slow_flag_only_while_someone_listens():
    assert not dispatch.STATE.slow
    sub = events.subscribe("op", lambda ev: None)
    assert dispatch.STATE.slow
    sub.unsubscribe()
    assert not dispatch.STATE.slow
    with events.subscribe("backward_step", lambda s: None):
        assert not dispatch.STATE.slow, "backward listeners do not slow the forward dispatch"
    with tl.tape():
        assert dispatch.STATE.slow
    assert not dispatch.STATE.slow


def test_subscribe_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown event kind 'opp'"):
        events.subscribe("opp", print)


def test_forward_records_in_order_with_metadata():
    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    with tl.tape() as t:
        h = x @ w
        y = tl.tanh(h)
        loss = y.sum()
    assert [n.op for n in t.nodes] == ["matmul", "tanh", "sum"]
    assert len(t) == 3 and all(isinstance(n, TapeNode) and n.kind == "forward" for n in t)
    mm, th, sm = t.nodes
    assert mm.input_shapes == ((2, 3), (3, 4)) and mm.shape == (2, 4)
    assert mm.inputs == (x._uid(), w._uid()) and mm.output == h._uid()
    assert th.inputs == (h._uid(),) and sm.inputs == (y._uid(),) and sm.output == loss._uid()
    assert sm.shape == () and sm.dtype == "float64" and sm.device == "cpu" and sm.requires_grad
    assert [n.grad_fn for n in t] == ["MmBackward0", "TanhBackward0", "SumBackward0"]
    assert [n.seq for n in t] == sorted(n.seq for n in t)
    assert all(n.duration_ns >= 0 for n in t) and mm.start_ns <= th.start_ns <= sm.start_ns
    assert loss.grad_fn.tape_seq == sm.seq and h.grad_fn.tape_seq == mm.seq
    with tl.no_grad(), tl.tape() as t2:
        z = x * 2
    assert t2[0].grad_fn == "" and not t2[0].requires_grad and z.grad_fn is None


def test_records_hold_tensors_weakly_unless_keep_values():
    x = leaf(3)
    with tl.tape() as t:
        y = x.exp()
    assert t[0].tensor is y and t[0].node is y.grad_fn and t[0].value is None
    del y
    gc.collect()
    assert t[0].tensor is None and t[0].node is None
    with tl.tape(keep_values=True) as k:
        y = x.exp()
    del y
    gc.collect()
    kept = k[0].tensor
    assert kept is not None
    vals = np.exp(np.asarray(x.detach()))
    s = k[0].value
    assert s["min"] == pytest.approx(vals.min()) and s["max"] == pytest.approx(vals.max())
    assert s["mean"] == pytest.approx(vals.mean()) and s["std"] == pytest.approx(vals.std(ddof=1))
    assert s["norm"] == pytest.approx(np.linalg.norm(vals)) and s["nan"] == 0 and s["inf"] == 0


def test_backward_steps_recorded_and_linked_to_forward():
    x, w = leaf(3), leaf(3, seed=1)
    with tl.tape(keep_values=True) as t:
        y = (x * w).exp()
        loss = y.sum()
        loss.backward()
    fwd = {n.seq: n for n in t if n.kind == "forward" and n.phase == "forward"}
    assert [n.op for n in fwd.values()] == ["mul", "exp", "sum"]
    back = [n for n in t if n.kind == "backward"]
    assert [n.op for n in back] == ["SumBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad",
                                    "AccumulateGrad"]
    assert [fwd[n.forward_seq].op for n in back[:3]] == ["sum", "exp", "mul"]
    assert back[3].forward_seq is None
    by_step = {n.op: n for n in back[:3]}
    # the gradient reaching exp's output is ones: its forward record gets that summary
    assert fwd[by_step["ExpBackward0"].forward_seq].grad["norm"] == pytest.approx(np.sqrt(3))
    assert by_step["MulBackward0"].input_shapes == ((3,),)
    assert by_step["MulBackward0"].output_shapes == ((3,), (3,))
    assert by_step["MulBackward0"].grad["norm"] == pytest.approx(
        np.linalg.norm(np.exp(np.asarray(x.detach()) * np.asarray(w.detach()))))
    vjp_ops = [n for n in t if n.kind == "forward" and n.phase == "backward"]
    assert vjp_ops and all(n.forward_seq in fwd for n in vjp_ops)
    assert {fwd[n.forward_seq].op for n in vjp_ops} <= {"sum", "exp", "mul"}


def test_module_path_is_recorded_and_copied_to_backward_records():
    x = leaf(2)
    with tl.tape() as t:
        with dispatch.module_scope("encoder"), dispatch.module_scope("encoder.layer0"):
            y = x * 2
        z = y + 1
        z.sum().backward(retain_graph=True)
    assert t[0].module == "encoder.layer0" and t[1].module == ""
    back = {n.op: n for n in t if n.kind == "backward"}
    assert back["MulBackward0"].module == "encoder.layer0" and back["AddBackward0"].module == ""
    with tl.tape() as t2:
        z.sum().backward()
    later = {n.op: n for n in t2 if n.kind == "backward"}
    # the link is the global op sequence number, so it still names the op recorded by the first tape
    assert later["AddBackward0"].forward_seq == t[1].seq and later["MulBackward0"].forward_seq == t[0].seq
    assert later["MulBackward0"].module == "", "module paths come from records in the same tape"


def test_nested_tapes_each_see_their_scope():
    x = leaf(2)
    with tl.tape() as outer:
        a = x * 2
        with tl.tape() as inner:
            b = a.exp()
        c = b.sum()
    assert [n.op for n in outer] == ["mul", "exp", "sum"]
    assert [n.op for n in inner] == ["exp"]
    assert inner[0].seq == outer[1].seq and not outer.recording and not inner.recording
    assert c.requires_grad


def test_exception_inside_scope_unsubscribes_and_failed_op_leaves_tape_usable():
    x = leaf(2)
    with pytest.raises(RuntimeError, match="must match the size"):
        with tl.tape() as t:
            ok = x * 2
            with pytest.raises(RuntimeError, match="must match the size"):
                x + leaf(3)     # fails inside dispatch: nothing recorded, the tape keeps going
            more = ok.exp()
            x + leaf(3)
    assert [n.op for n in t] == ["mul", "exp"]
    assert not dispatch.STATE.slow and not events.has_subscribers("op")
    assert not events.has_subscribers("backward_step")
    n = len(t)
    _ = more * 3
    assert len(t) == n, "a closed tape records nothing"


def test_to_dict_is_json_and_clear():
    x = tl.tensor([0.0, 1.0], requires_grad=True)
    with tl.tape(keep_values=True) as t:
        y = tl.log(x)  # -inf: summaries stay strict JSON
        y.sum().backward()
    d = t.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["version"] == 1 and back["nodes"][0]["op"] == "log"
    assert back["nodes"][0]["value"]["inf"] == 1 and back["nodes"][0]["input_shapes"] == [[2]]
    assert any(n["kind"] == "backward" for n in back["nodes"])
    assert "_refs" not in back["nodes"][0]
    t.clear()
    assert len(t) == 0 and t.to_dict()["nodes"] == []


def test_tape_cannot_be_entered_twice_at_once_but_can_be_reused():
    t = tl.tape()
    x = leaf(2)
    with t:
        with pytest.raises(RuntimeError, match="already recording"):
            t.__enter__()
        x * 2
    with t:
        x * 3
    assert len(t) == 2


def test_summarize_edge_cases():
    assert summarize(None) is None
    empty = summarize(tl.zeros(0))
    assert empty["min"] is None and empty["nan"] == 0
    one = summarize(tl.tensor([float("nan"), 2.0]))
    assert one["nan"] == 1 and one["min"] == 2.0 and one["std"] is None


def _reference(a: np.ndarray) -> dict:
    """What the summary means, computed plainly with numpy in float64."""
    a = a.astype(np.float64).ravel()
    f = a[np.isfinite(a)]
    return {"min": f.min(), "max": f.max(), "mean": f.mean(), "std": f.std(ddof=1), "norm": np.sqrt((f * f).sum()),
            "nan": int(np.isnan(a).sum()), "inf": int(np.isinf(a).sum()), "zero": int((a == 0).sum())}


def test_summary_matches_numpy_and_batches_agree_with_single_summaries():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((30, 20)).astype(np.float32), rng.standard_normal((7, 9)).T,
              rng.integers(-5, 5, 40), np.array([1.0, np.nan, np.inf, -2.0, 3.0]),
              1.7e9 + rng.integers(0, 3, 50),                       # cancellation: large values, small spread
              np.array([True, False, True])]
    tensors = [tl.tensor(a) for a in arrays]
    for a, t in zip(arrays, tensors):
        got, want = summarize(t), _reference(a)
        assert set(got) == set(want)
        np.testing.assert_allclose([got[k] for k in want], [want[k] for k in want], rtol=1e-9)
    def same(a, b):
        return a.keys() == b.keys() and all(
            a[k] == b[k] or (a[k] is not None and b[k] is not None and np.isclose(a[k], b[k], rtol=1e-12, atol=0))
            for k in a)
    batch = summarize_samples([sample(t, None) for t in tensors])
    assert all(same(a, b) for a, b in zip(batch, [summarize(t) for t in tensors]))
    streamed = summarize_samples([sample(t) for t in tensors] + [sample(tl.zeros(0))])
    assert all(same(a, b) for a, b in zip(streamed, [summarize(t, 256) for t in tensors]))
    assert streamed[-1] == {"min": None, "max": None, "mean": None, "std": None, "norm": None, "nan": 0, "inf": 0,
                            "zero": 0}


def test_sampled_summary_strides_and_scales_the_norm():
    t = tl.arange(10000, dtype=tl.float64)
    s = summarize(t, 100)
    assert s["sampled"] == 100 and s["min"] == 0 and s["max"] == 9900
    assert abs(s["norm"] - np.sqrt((np.arange(10000.0) ** 2).sum())) / s["norm"] < 0.02
    assert "sampled" not in summarize(t)
    x = tl.ones(3)
    snap = sample(x)
    x.mul_(5)
    assert summarize_samples([snap])[0]["max"] == 1.0          # a sample is a snapshot
    assert sample(None) is None and sample(tl.empty(2, device="meta")) is None


def test_overflowing_statistics_are_none():
    s = summarize(tl.tensor([1e308, 1e308], dtype=tl.float64))
    assert s["min"] == 1e308 and s["norm"] is None and s["mean"] is None and s["nan"] == s["inf"] == 0
    assert json.loads(json.dumps(s)) == s


def test_a_tape_subclass_decides_per_event_through_the_sink_api():
    class ForwardOnly(tl.tape):
        def __init__(self):
            super().__init__()
            self.steps = 0

        def record_op(self, ev):
            return super().record_op(ev) if ev.op != "exp" else None

        def record_step(self, step):
            self.steps += 1

    x = leaf(3)
    with ForwardOnly() as t:
        y = (x * 2).exp().sum()
        y.backward()
    assert [n.op for n in t if n.phase == "forward"] == ["mul", "sum"] and t.steps == 4   # sum, exp, mul, AccumulateGrad
    mul = t[0]
    assert t.forward_record(mul.seq) is mul and t.forward_record(None) is None



def test_accumulation_ops_belong_to_the_backward_phase_and_repr_counts_by_phase():
    # a non-contiguous gradient is copied into .grad (the layout contract): that copy is an op the
    # backward walk dispatched, so it is a backward-phase record, as the views count it
    w = tl.randn(4, 3, requires_grad=True)
    with tl.tape() as t:
        loss = (w * w).sum()
        loss.backward(create_graph=True)
        loss.backward(create_graph=True)   # .grad = old + g: an add the accumulation dispatches
    assert [n.op for n in t.nodes if n.phase == "forward"] == ["mul", "sum"]
    backward_ops = [n.op for n in t.nodes if n.kind == "forward" and n.phase == "backward"]
    assert backward_ops[-1] == "add", backward_ops
    assert t.counts() == {"forward": 2, "backward": len(t.nodes) - 2}
    assert repr(t) == f"<tapelab.tape: 2 forward, {len(t.nodes) - 2} backward records>"
    np.testing.assert_allclose(w.grad.detach().numpy(), 4 * w.detach().numpy(), rtol=1e-6)
