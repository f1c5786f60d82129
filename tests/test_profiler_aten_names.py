"""The profiler's event names are PyTorch's: the same programs profiled under tapelab and under torch
give the keys programs look up (``aten::mm``, ``aten::linear``, ``AddmmBackward0``,
``autograd::engine::evaluate_function: ...``, ``torch::autograd::AccumulateGrad``, the optimizer's
ranges). Not every key: tapelab does not chase each aten sub-call (``aten::resolve_conj``...).
Also the naming's own pieces: the call-tree declarations parse, the events nest as the tree says."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab
from tapelab.core.registry import REGISTRY
from tapelab.profiler import names


def keys(m, program) -> set:
    with m.profiler.profile(activities=[m.profiler.ProfilerActivity.CPU]) as prof:
        program(m)
    return {e.key for e in prof.key_averages()}


def both(program) -> tuple:
    return keys(tapelab, program), keys(torch, program)


def _data(m, *shape, seed=0):
    return m.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def mlp_ce(m):
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Linear(8, 16), m.nn.ReLU(), m.nn.Linear(16, 2))
    x = _data(m, 4, 8)
    with m.profiler.record_function("model_inference"):
        loss = m.nn.functional.cross_entropy(model(x), m.tensor([0, 1, 0, 1]))
        loss.backward()


def conv_pool(m):
    m.manual_seed(0)
    model = m.nn.Sequential(m.nn.Conv2d(3, 4, 3), m.nn.ReLU(), m.nn.MaxPool2d(2), m.nn.Flatten(), m.nn.Linear(36, 2))
    model(_data(m, 2, 3, 8, 8)).sum().backward()


def matmuls(m):
    a, w = _data(m, 2, 3, 4), _data(m, 5, 4, seed=1)
    m.bmm(a, a.transpose(1, 2))
    m.matmul(a, a.transpose(1, 2))
    a[0] @ w.T
    m.mm(a[0], w.T)
    m.nn.functional.linear(a, w)
    m.nn.functional.softmax(a, -1)


def optimizer_steps(m):
    m.manual_seed(0)
    model = m.nn.Linear(4, 2)
    for opt in (m.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), m.optim.Adam(model.parameters(), lr=0.1)):
        opt.zero_grad()
        model(_data(m, 3, 4)).pow(2).mean().backward()
        opt.step()


def tensors(m):
    x = m.zeros(3) + m.ones(3) * 2
    m.empty(2)
    m.randn(2, 2)
    y = x.to(m.float64).sum() + x.mean()
    x.clone().copy_(x)


CASES = {
    "linear relu cross_entropy": (mlp_ce, {
        "model_inference", "aten::linear", "aten::t", "aten::addmm", "aten::relu", "aten::clamp_min",
        "aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax", "aten::nll_loss",
        "aten::nll_loss_forward", "aten::nll_loss_backward", "aten::_log_softmax_backward_data", "aten::mm",
        "aten::threshold_backward", "AddmmBackward0", "ReluBackward0", "NllLossBackward0",
        "autograd::engine::evaluate_function: AddmmBackward0", "torch::autograd::AccumulateGrad",
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"}),
    "conv2d maxpool": (conv_pool, {
        "aten::conv2d", "aten::convolution", "aten::_convolution", "aten::max_pool2d",
        "aten::max_pool2d_with_indices", "aten::convolution_backward", "aten::max_pool2d_with_indices_backward",
        "ConvolutionBackward0", "MaxPool2DWithIndicesBackward0", "aten::linear", "aten::addmm", "aten::sum",
        "autograd::engine::evaluate_function: ConvolutionBackward0"}),
    "matmul bmm": (matmuls, {"aten::matmul", "aten::mm", "aten::bmm", "aten::linear", "aten::softmax",
                             "aten::_softmax"}),
    "optimizer step": (optimizer_steps, {
        "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad", "Optimizer.step#Adam.step",
        "aten::add_", "aten::mul_", "aten::addcmul_", "aten::sqrt", "aten::div", "aten::mean", "aten::pow"}),
    "factories and conversions": (tensors, {
        "aten::zeros", "aten::ones", "aten::empty", "aten::randn", "aten::add", "aten::mul", "aten::to",
        "aten::_to_copy", "aten::sum", "aten::mean", "aten::clone", "aten::copy_"}),
}


@pytest.mark.parametrize("case", CASES)
def test_keys_programs_look_up_are_pytorchs(case):
    program, important = CASES[case]
    got, want = both(program)
    assert important <= want, sorted(important - want)        # the list itself is PyTorch's
    assert important <= got, sorted(important - got)


def test_no_key_is_a_bare_op_name():
    """Every op event is an aten:: one; the others are nodes, ranges and the autograd engine's events."""
    got = set().union(*(keys(tapelab, program) for program, _ in CASES.values()))
    plain = {k for k in got if not k.startswith(("aten::", "autograd::", "torch::", "Optimizer."))
             and not k.endswith("Backward0") and k != "model_inference"}
    assert not plain, plain


def test_events_nest_as_pytorchs():
    with tapelab.profiler.profile() as prof:
        mlp_ce(tapelab)
    evs = prof.events()

    def parent(name, phase=None):
        return {e.parent.name if e.parent is not None else None for e in evs
                if e.name == name and phase in (None, e.phase)}

    assert parent("aten::addmm") == parent("aten::t", "forward") == {"aten::linear"}
    assert parent("aten::t", "backward") == {"AddmmBackward0"}
    assert parent("aten::linear") == {"model_inference"}
    assert parent("aten::log_softmax") == parent("aten::nll_loss_nd") == {"aten::cross_entropy_loss"}
    assert parent("aten::_log_softmax") == {"aten::log_softmax"}
    assert parent("aten::nll_loss_forward") == {"aten::nll_loss"}
    assert parent("AddmmBackward0") == {"autograd::engine::evaluate_function: AddmmBackward0"}
    assert parent("aten::mm") == {"AddmmBackward0"}
    assert parent("torch::autograd::AccumulateGrad") == {
        "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"}
    for e in evs:   # laid out inside their op's span: a parent's time covers its children's
        assert e.self_ns >= 0 and sum(c.duration_ns for c in e.children) <= e.duration_ns


def test_flops_and_memory_sit_on_the_event_that_carries_them():
    x, w = _data(tapelab, 4, 8), _data(tapelab, 16, 8)
    with tapelab.profiler.profile(with_flops=True, profile_memory=True) as prof:
        tapelab.nn.functional.linear(x, w, tapelab.zeros(16))
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::addmm"].flops == 2 * 4 * 16 * 8 and rows["aten::linear"].flops == 0
    assert rows["aten::addmm"].self_cpu_memory_usage == 4 * 16 * 4 and rows["aten::linear"].self_cpu_memory_usage == 0
    assert rows["aten::linear"].cpu_memory_usage == 4 * 16 * 4
    assert [m.name for m in prof.trace.memory][:1] == ["aten::linear"]


def test_in_place_writes_are_the_underscore_ops():
    p = tapelab.ones(3, requires_grad=True)
    with tapelab.profiler.profile() as prof, tapelab.no_grad():
        p.add_(1.0).mul_(2.0)
        p.zero_()
    assert [e.name for e in prof.events()] == ["aten::add_", "aten::mul_", "aten::fill_"]


def test_declared_call_trees_parse():
    for op in REGISTRY.values():
        if isinstance(op.aten, str):
            calls = names.parse(op.aten)
            assert calls[0][1] == 0 and sum(c[3] for c in calls) == 1, op.name
            assert all(c[0].startswith("aten::") for c in calls), op.name
    assert names.parse("linear(t, addmm)") == (("aten::linear", 0, False, False), ("aten::t", 1, True, False),
                                               ("aten::addmm", 1, False, True))
    assert names.parse("conv2d*(convolution)")[0][3]
    with pytest.raises(ValueError):
        names.parse("linear(t, addmm")
    # a name that is no identifier (a compiled graph's) is kept as it is
    assert names.calls("fused(mul, add)") == (("fused(mul, add)", 0, False, True),)
    assert names.op_name("add") == "aten::add" and names.op_name("add_") == "aten::add_"
    assert names.op_name("fill_") == "aten::fill_"


def test_layout_covers_the_span_in_order():
    calls = names.parse("cross_entropy_loss(log_softmax(_log_softmax), nll_loss_nd(nll_loss(nll_loss_forward)))")
    spans = names.layout(calls, 1000, 600)
    assert spans[0] == (1000, 600)
    assert spans[1] == spans[2] == (1000, 300) and spans[3] == spans[4] == spans[5] == (1300, 300)
    spans = names.layout(names.parse("linear(t, addmm)"), 0, 100)
    assert spans == [(0, 100), (0, 1), (1, 99)]
    assert names.layout(names.parse("t, mm, t, mm, sum"), 0, 302) == [(0, 1), (1, 100), (101, 1), (102, 100),
                                                                      (202, 100)]


def test_flame_graph_stacks_put_a_call_under_its_op():
    from tapelab.profiler.export import stacks
    x, w = _data(tapelab, 4, 8), _data(tapelab, 16, 8)
    with tapelab.profiler.profile(with_stack=True) as prof:
        tapelab.nn.functional.linear(x, w, tapelab.zeros(16))
    tails = [line.rsplit(" ", 1)[0].split(";<module>;")[-1].split(";")[-2:] for line in stacks(prof.trace)
             if "aten::linear" in line]
    assert [t[-1] for t in tails] == ["aten::linear", "aten::t", "aten::addmm"]
    assert tails[1][0] == tails[2][0] == "aten::linear" and tails[0][0] != "aten::linear"
