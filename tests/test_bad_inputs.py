"""Bad inputs per subsystem and what each gives; docs/bad-inputs.md is this table, generated here.

Where PyTorch has the same call, the case runs on both and asserts the same exception class and
PyTorch's message inside ours (issue 16, defect 6: huge sizes, bad steps, out-of-range
indices, ragged data, bad reshape sizes, bad ``.grad``). Cases without a PyTorch twin (bad
checkpoint files, FX names from data, panel messages) assert the exception tapelab promises.
``pytest tests/test_bad_inputs.py --update-docs`` rewrites the page after a deliberate change.
"""
from __future__ import annotations

import io
import json
import pathlib
import re
import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import safetensors.numpy
import torch

import tapelab
from tapelab.kernel.bridge import validate
from tapelab.serialization import CheckpointError, _safetensors

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "bad-inputs.md"


@dataclass(frozen=True)
class Case:
    subsystem: str
    what: str                       # the bad input, in words
    call: Callable                  # call(m): m is tapelab, or torch where ``torch_too``
    expect: type = None             # tapelab-only cases: the exception class promised
    match: str = ""                 # text the message contains (torch cases: PyTorch's own)
    torch_too: bool = False
    torch_match: str | None = None  # PyTorch's text where it differs from ours (else ``match``)


def _grad_set(m, value):
    w = m.zeros(3, requires_grad=True)
    w.grad = value(m)


def _foreign(dtype: str, size: int, n: int = 3) -> bytes:
    header = json.dumps({"t": {"dtype": dtype, "shape": [n], "data_offsets": [0, n * size]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * (n * size)


def _crafted(tree) -> bytes:
    arrays = {"w": np.ones(2, np.float32), "i": np.ones(2, np.int64)}
    md = {"format": "tapelab", "tapelab.version": "1",
          "tapelab.tree": tree if isinstance(tree, str) else json.dumps(tree)}
    md["tapelab.sha256"] = _safetensors.digest(md, arrays)     # a valid checksum: only the tree is bad
    return safetensors.numpy.save(arrays, metadata=md)


def _node(name="w", device="cpu", grad=False):
    return {"dict": [["k", {"tensor": name, "device": device, "grad": grad, "param": False}]]}


def _good_file() -> bytes:
    buf = io.BytesIO()
    buf.name = "good.safetensors"     # a state dict saved under a safetensors name: tapelab's checksummed format
    tapelab.save({"w": tapelab.arange(8.0)}, buf)
    return buf.getvalue()


def _flipped(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0x40
    return bytes(b)


def _load(data: Callable[[], bytes]):
    return lambda m: tapelab.load(io.BytesIO(data()))


def _nested_header() -> bytes:
    body = b'{"__metadata__": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return struct.pack("<Q", len(body)) + body


def _trace_method(name):
    class M(tapelab.nn.Module):
        def forward(self, x):
            return getattr(x, name)()
    gm = tapelab.fx.symbolic_trace(M())
    return gm(tapelab.ones(2))


def _bad_node_name(m):
    g = tapelab.fx.Graph()
    g.placeholder("x; import os")
    g.output(None)
    g.python_code("self")


def _reply(data):
    def call(m):
        problem = validate(data)
        if problem is not None:
            raise _ErrorReply(problem)
    return call


class _ErrorReply(Exception):
    """Stands for the bridge's answer to a bad panel message (an ``error`` message, not an exception)."""


CASES = [
    # creation: PyTorch's classes and messages
    Case("creation", "empty(2**40, 2**20): 4 EiB", lambda m: m.empty(2 ** 40, 2 ** 20),
         match="DefaultCPUAllocator: can't allocate memory: you tried to allocate 4611686018427387904 bytes",
         torch_too=True),
    Case("creation", "zeros(2**40, 2**20): 4 EiB", lambda m: m.zeros(2 ** 40, 2 ** 20),
         match="DefaultCPUAllocator: can't allocate memory", torch_too=True),
    Case("creation", "empty(2**62): storage size overflows", lambda m: m.empty(2 ** 62),
         match="Storage size calculation overflowed with sizes=[4611686018427387904]", torch_too=True),
    Case("creation", "empty(2**63): size is not an int64", lambda m: m.empty(2 ** 63),
         match="argument 'size' failed to unpack the object at pos 1 with error \"Overflow when unpacking long long",
         torch_too=True),
    Case("creation", "empty(-1)", lambda m: m.empty(-1),
         match="Trying to create tensor with negative dimension -1: [-1]", torch_too=True),
    Case("creation", "linspace(0, 1, steps=-1)", lambda m: m.linspace(0, 1, steps=-1),
         match="number of steps must be non-negative", torch_too=True),
    Case("creation", "logspace(0, 1, steps=-1)", lambda m: m.logspace(0, 1, steps=-1),
         match="number of steps must be non-negative", torch_too=True),
    Case("creation", "tensor([[1, 2], [3]]): ragged", lambda m: m.tensor([[1, 2], [3]]),
         match="expected sequence of length 2 at dim 1 (got 1)", torch_too=True),
    Case("creation", "tensor([[[1], [2]], [[3], [4, 5]]]): ragged at depth 2",
         lambda m: m.tensor([[[1], [2]], [[3], [4, 5]]]),
         match="expected sequence of length 1 at dim 2 (got 2)", torch_too=True),
    Case("creation", "tensor([[1, 2], 3]): a number where a sequence is expected",
         lambda m: m.tensor([[1, 2], 3]), match="not a sequence", torch_too=True),
    # indexing and views
    Case("indexing", "zeros(3)[5]", lambda m: m.zeros(3)[5],
         match="index 5 is out of bounds for dimension 0 with size 3", torch_too=True),
    Case("indexing", "zeros(3)[-4]", lambda m: m.zeros(3)[-4],
         match="index -4 is out of bounds for dimension 0 with size 3", torch_too=True),
    Case("indexing", "zeros(3, 4)[1, 7]", lambda m: m.zeros(3, 4)[1, 7],
         match="index 7 is out of bounds for dimension 1 with size 4", torch_too=True),
    Case("indexing", "zeros(2, 3, 4)[..., 9]", lambda m: m.zeros(2, 3, 4)[..., 9],
         match="index 9 is out of bounds for dimension 2 with size 4", torch_too=True,
         torch_match="index 9 is out of bounds for dimension 1 with size 4"),   # (PyTorch counts after the ...)
    Case("indexing", "zeros(3)[5] = 1", lambda m: m.zeros(3).__setitem__(5, 1.0),
         match="index 5 is out of bounds for dimension 0 with size 3", torch_too=True),
    Case("views", "zeros(6).reshape(-2, 3)", lambda m: m.zeros(6).reshape(-2, 3),
         match="invalid shape dimension -2 at index 0 of shape [-2, 3]", torch_too=True),
    Case("views", "zeros(6).reshape(-2, -3): product matches", lambda m: m.zeros(6).reshape(-2, -3),
         match="invalid shape dimension -2 at index 0 of shape [-2, -3]", torch_too=True),
    Case("views", "zeros(6).view(3, -5)", lambda m: m.zeros(6).view(3, -5),
         match="invalid shape dimension -5 at index 1 of shape [3, -5]", torch_too=True),
    Case("views", "zeros(6).reshape(-1, -1)", lambda m: m.zeros(6).reshape(-1, -1),
         match="only one dimension can be inferred", torch_too=True),
    Case("views", "zeros(6).reshape(4, 2)", lambda m: m.zeros(6).reshape(4, 2),
         match="shape '[4, 2]' is invalid for input of size 6", torch_too=True),
    # autograd: .grad assignment (defect 3)
    Case("autograd", "w.grad = ones(1) on a 3-element w", lambda m: _grad_set(m, lambda m: m.ones(1)),
         match="attempting to assign a gradient of size '[1]' to a tensor of size '[3]'", torch_too=True),
    Case("autograd", "w.grad = float64 grad on a float32 w",
         lambda m: _grad_set(m, lambda m: m.zeros(3, dtype=m.float64)),
         match="to a tensor with dtype 'tapelab.float32'", torch_too=True,
         torch_match="attempting to assign a gradient with dtype 'double' to a tensor with grad_dtype 'Float'"),
    # checkpoints: every bad file is a CheckpointError naming the problem (defect 6)
    Case("checkpoint load", "foreign safetensors, F8_E8M0 tensor", _load(lambda: _foreign("F8_E8M0", 1)),
         CheckpointError, "dtype F8_E8M0"),
    Case("checkpoint load", "foreign safetensors, F6_E2M3 tensor", _load(lambda: _foreign("F6_E2M3", 1)),
         CheckpointError, "dtype F6_E2M3"),
    Case("checkpoint load", "header nested 100,000 deep", _load(_nested_header), CheckpointError,
         "nests too deeply"),
    Case("checkpoint load", "tree node with device 'bogus:7'", _load(lambda: _crafted(_node(device="bogus:7"))),
         CheckpointError, "bad device 'bogus:7'"),
    Case("checkpoint load", "tree node: int64 tensor marked requires_grad",
         _load(lambda: _crafted(_node("i", grad=True))), CheckpointError, "int64 is marked requires_grad"),
    Case("checkpoint load", "tree node with a non-bool flag", _load(lambda: _crafted(_node(grad="no"))),
         CheckpointError, "two booleans"),
    Case("checkpoint load", "truncated to 20 bytes", _load(lambda: _good_file()[:20]), CheckpointError,
         "truncated"),
    Case("checkpoint load", "one bit flipped in the tensor data", _load(lambda: _flipped(_good_file(), -3)),
         CheckpointError, "checksum mismatch"),
    Case("checkpoint load", "not a checkpoint (text)", _load(lambda: b"hello, world" * 10), CheckpointError,
         "not a checkpoint"),
    # FX: names taken from data never become code (defect 4)
    Case("fx", "getattr(x, name)() with name = \"__class__.__init__.__globals__['os'].system('x')\"",
         lambda m: _trace_method("__class__.__init__.__globals__['os'].system('x')"), AttributeError, "'Tensor'"),
    Case("fx", "placeholder named 'x; import os'", _bad_node_name, ValueError, "not a valid Python identifier"),
    # the panel's messages to the kernel (defect 7): answered with an error message
    Case("kernel bridge", "{'type': 'set', 'recording': 'no'}", _reply({"type": "set", "recording": "no"}),
         _ErrorReply, "field 'recording' must be bool"),
    Case("kernel bridge", "a list instead of a message", _reply([1, 2]), _ErrorReply, "JSON object"),
    Case("kernel bridge", "{'type': 'launch'}", _reply({"type": "launch"}), _ErrorReply, "unknown"),
]


def _outcome(call, m) -> BaseException:
    try:
        call(m)
    except Exception as e:           # the thing under test
        return e
    pytest.fail(f"{m.__name__}: no exception")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.subsystem}: {c.what}" for c in CASES])
def test_bad_input(case):
    ours = _outcome(case.call, tapelab)
    if case.torch_too:
        theirs = _outcome(case.call, torch)
        assert _kind(ours) == _kind(theirs), (ours, theirs)
        assert (case.torch_match or case.match) in str(theirs), f"PyTorch's message changed: {theirs}"
    else:
        assert isinstance(ours, case.expect), ours
    assert case.match in str(ours), ours


def _kind(e: BaseException) -> type:
    """The builtin class an exception is (PyTorch's own subclasses count as their base)."""
    for cls in type(e).__mro__:
        if cls.__module__ == "builtins":
            return cls
    return type(e)


def _cell(text: str) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    line = re.sub(r" at 0x[0-9a-f]+", "", re.sub(r"\s+", " ", line))   # no addresses: the page is stable
    if len(line) > 110:
        line = line[:107] + "..."
    return line.replace("|", "\\|")


def _gives(e: BaseException) -> str:
    if isinstance(e, _ErrorReply):
        return f"error reply: {_cell(e)}"
    return f"`{type(e).__name__}`: {_cell(e)}"


def render() -> str:
    rows = ["# Bad inputs and what they give", "",
            "Generated by `tests/test_bad_inputs.py` (every row is a test; `pytest tests/test_bad_inputs.py "
            "--update-docs` rewrites this page). Where PyTorch has the same call, the test asserts the same "
            "exception class and PyTorch's message inside tapelab's. Messages are cut at 110 characters.", "",
            "| subsystem | bad input | tapelab gives | PyTorch gives |", "|---|---|---|---|"]
    for c in CASES:
        ours = _gives(_outcome(c.call, tapelab))
        theirs = _gives(_outcome(c.call, torch)) if c.torch_too else "—"
        rows.append(f"| {c.subsystem} | {_cell(c.what)} | {ours} | {theirs} |")
    return "\n".join(rows) + "\n"


def test_doc_table_is_generated_from_these_cases(request):
    text = render()
    if request.config.getoption("--update-docs"):
        DOC.write_text(text)
    assert DOC.read_text() == text, "docs/bad-inputs.md is stale: run pytest tests/test_bad_inputs.py --update-docs"
