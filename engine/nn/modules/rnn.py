"""Recurrent layers: ``RNN`` (tanh/relu), ``LSTM``, ``GRU`` and their single-step cells.

One step function per mode (``_STEPS``) serves both the cells and the multi-layer modules;
the LSTM and GRU nonlinearities are one fused op each (``_fused_rnn``). The layers hoist the input projection out of the time loop
(one matmul for the whole sequence) so the loop only does the hidden-to-hidden product.
States are tuples inside: ``(h,)`` for RNN/GRU, ``(h, c)`` for LSTM.
"""
from __future__ import annotations

import math
import numbers
import warnings

from ...base import dtype as dtypes
from ...base.dispatch_state import STATE as _DISPATCH
from ...core import creation
from ...core.dispatch import composite
from ...ops.movement import cat, stack
from .. import _fused_rnn, functional as F, init
from ..parameter import Parameter
from .._packed_sequence import PackedSequence
from ...core.tensor import Tensor
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---------------------------------------------------------------- one time step per mode
# ``gi`` is the input projection x W_ihᵀ + b_ih, already computed; each step returns the new state.

def _rnn_tanh_step(gi: Tensor, state: tuple, w_hh: Tensor, b_hh, w_hr=None) -> tuple:
    return ((gi + F.linear(state[0], w_hh, b_hh)).tanh(),)


def _rnn_relu_step(gi: Tensor, state: tuple, w_hh: Tensor, b_hh, w_hr=None) -> tuple:
    return ((gi + F.linear(state[0], w_hh, b_hh)).relu(),)


def _lstm_step(gi: Tensor, state: tuple, w_hh: Tensor, b_hh, w_hr=None) -> tuple:
    h, c = _fused_rnn.lstm_cell(gi + F.linear(state[0], w_hh, b_hh), state[1])   # one op: gates i, f, g, o
    return (h if w_hr is None else F.linear(h, w_hr), c)


def _gru_step(gi: Tensor, state: tuple, w_hh: Tensor, b_hh, w_hr=None) -> tuple:
    return (_fused_rnn.gru_cell(gi, F.linear(state[0], w_hh, b_hh), state[0]),)   # gates r, z, n


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step, "GRU": _gru_step}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_WHOLE_LAYER = {"LSTM": _fused_rnn.lstm_layer, "GRU": _fused_rnn.gru_layer}


def _scan(step, gi: Tensor, state: tuple, w_hh, b_hh, w_hr, reverse: bool) -> tuple[Tensor, tuple]:
    """Run ``step`` over the time axis of ``gi`` (T, B, G); returns outputs (T, B, H) and the last state."""
    inputs = gi.unbind(0)
    outputs = [None] * len(inputs)
    for t in (reversed(range(len(inputs))) if reverse else range(len(inputs))):
        state = step(inputs[t], state, w_hh, b_hh, w_hr)
        outputs[t] = state[0]
    return stack(outputs), state


def _scan_packed(step, gi: Tensor, sizes: list, state: tuple, w_hh, b_hh, w_hr, reverse: bool):
    """The time loop over packed rows: ``gi`` (N, G) splits by ``sizes`` (batch_sizes); step t runs the
    first ``sizes[t]`` sequences and the rest keep their state (frozen after their end going forward,
    still the initial state going backward). Returns outputs (N, H) and the last state."""
    inputs = gi.split(sizes, 0)
    outputs = [None] * len(sizes)
    for t in (reversed(range(len(sizes))) if reverse else range(len(sizes))):
        b = sizes[t]
        new = step(inputs[t], tuple(s[:b] for s in state), w_hh, b_hh, w_hr)
        state = new if b == state[0].shape[0] else tuple(cat([n, s[b:]], 0) for n, s in zip(new, state))
        outputs[t] = new[0]
    return cat(outputs, 0), state


# ---------------------------------------------------------------- multi-layer modules

def _check_int(value, name: str) -> None:
    if not isinstance(value, int):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero")


class RNNBase(Module):
    """Shared construction, checks and the layer/direction loop of RNN, LSTM and GRU."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        _check_int(input_size, "input_size")
        _check_int(hidden_size, "hidden_size")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        self._register_weights(_GATES[mode] * hidden_size, device, dtype)
        self.reset_parameters()
        if dropout > 0 and num_layers == 1:
            # After the first draw, not before as PyTorch: the process's first numba loop imports scipy, whose
            # import resets Python's warning registries, so a warning given before it would show twice.
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)

    def _register_weights(self, gate_size: int, device, dtype) -> None:
        """Parameters in PyTorch's order and names, so state dicts carry over."""
        real_hidden = self.proj_size or self.hidden_size
        num_directions = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            layer_input = self.input_size if layer == 0 else real_hidden * num_directions
            for direction in range(num_directions):
                shapes = {"weight_ih": (gate_size, layer_input), "weight_hh": (gate_size, real_hidden)}
                if self.bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if self.proj_size:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for kind, shape in shapes.items():
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(creation.empty(shape, device=device, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """A no-op kept for API compatibility: there is no fused (cuDNN) weight buffer to compact."""

    @property
    def _flat_weights(self) -> list:
        """The weights forward reads, in ``_flat_weights_names``' order. PyTorch keeps them as a list
        that assigning a named weight updates; here forward reads the named attributes (so
        ``functional_call``'s parameter readers reach it), and assigning the list assigns each name
        under Module's rules, which leaves an unchanged entry alone (higher's functional RNNs
        reassign the list after swapping in their fast weights)."""
        return [getattr(self, name) for name in self._flat_weights_names]

    @_flat_weights.setter
    def _flat_weights(self, weights: list) -> None:
        for name, weight in zip(self._flat_weights_names, weights):
            if getattr(self, name, None) is not weight:
                setattr(self, name, weight)

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _direction_weights(self, index: int) -> tuple:
        """(w_ih, b_ih, w_hh, b_hh, w_hr) of one layer-direction, with None where absent."""
        w = {name.rsplit("_l", 1)[0]: getattr(self, name) for name in self._all_weights[index]}
        return w["weight_ih"], w.get("bias_ih"), w["weight_hh"], w.get("bias_hh"), w.get("weight_hr")

    # ---- checks
    def _check_input(self, input: Tensor) -> None:
        wdtype = self._flat_weights[0].dtype
        if input.dtype != wdtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({wdtype}). "
                             f"Convert input: input.to({wdtype}), or convert model: model.to({input.dtype})")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def _expected_state_shape(self, input: Tensor, size: int) -> tuple:
        batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    @staticmethod
    def _check_state(hx: Tensor, expected: tuple, what: str = "hidden") -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(hx.shape)}")

    def _batched_input(self, input: Tensor, kind: str) -> tuple[Tensor, bool]:
        if input.ndim not in (2, 3):
            raise ValueError(f"{kind}: Expected input to be 2D or 3D, got {input.ndim}D"
                             + (" tensor instead" if kind == "RNN" else " instead"))
        if input.ndim == 3:
            return input, True
        return input.unsqueeze(0 if self.batch_first else 1), False

    def _zeros_state(self, input: Tensor, size: int) -> Tensor:
        return creation.zeros(self._expected_state_shape(input, size), dtype=input.dtype, device=input.device)

    # ---- the layer / direction loop
    def _run(self, input: Tensor, states: tuple, sizes: list | None = None) -> tuple[Tensor, tuple]:
        """``input`` batched (as laid out by batch_first), or packed data (N, I) with its batch ``sizes``;
        ``states`` a tuple of (L*D, B, H) tensors."""
        step = _STEPS[self.mode]
        num_directions = 2 if self.bidirectional else 1
        x = input.transpose(0, 1) if self.batch_first and sizes is None else input
        initial = [s.unbind(0) for s in states]
        fused = self._whole_layer_op(x, sizes)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                index = layer * num_directions + direction
                w_ih, b_ih, w_hh, b_hh, w_hr = self._direction_weights(index)
                if fused:
                    out, *state = fused(x, *(s[index] for s in initial), w_ih, w_hh, b_ih, b_hh,
                                        reverse=direction == 1)
                elif sizes is None:
                    out, state = self._layer(step, x, tuple(s[index] for s in initial), w_ih, b_ih, w_hh, b_hh, w_hr,
                                             direction == 1)
                else:
                    out, state = _scan_packed(step, F.linear(x, w_ih, b_ih), sizes,
                                              tuple(s[index] for s in initial), w_hh, b_hh, w_hr,
                                              reverse=direction == 1)
                outs.append(out)
                finals.append(state)
            x = outs[0] if num_directions == 1 else cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output = x.transpose(0, 1) if self.batch_first and sizes is None else x
        return output, tuple(stack([f[k] for f in finals]) for k in range(len(states)))

    def _layer(self, step, x: Tensor, state: tuple, w_ih, b_ih, w_hh, b_hh, w_hr, reverse: bool) -> tuple:
        """One layer-direction, one cell op per step; an LSTM's as ATen's ``mkldnn_rnn_layer`` (autocast
        lowers its input, weights and states as a whole on the cpu, where a GRU's stays float32)."""
        def run(x, w_ih, b_ih, w_hh, b_hh, *state):
            return _scan(step, F.linear(x, w_ih, b_ih), state, w_hh, b_hh, w_hr, reverse=reverse)
        if self.mode == "LSTM" and not self.proj_size:
            return composite("mkldnn_rnn_layer", run, x, w_ih, b_ih, w_hh, b_hh, *state)
        return run(x, w_ih, b_ih, w_hh, b_hh, *state)

    def _whole_layer_op(self, x: Tensor, sizes: list | None):
        """The op that runs a layer-direction over the whole sequence (``_fused_rnn.lstm_layer`` or
        ``gru_layer``), or None for one cell op per step. The per-step path stays for RNN_TANH/RELU,
        packed input, projections, dtypes other than float32/float64, the meta device and while a
        Mode that does not declare ``whole_layer_ops`` is active (autocast casts per primitive, as
        PyTorch's dispatcher does inside its lstm; capture and the ONNX export see each step; the
        compile tracer keeps the whole-layer ops as nodes)."""
        layer = _WHOLE_LAYER.get(self.mode)
        if (layer is None or sizes is not None or self.proj_size or x.shape[0] == 0
                or x.dtype not in (dtypes.float32, dtypes.float64) or x.device.type == "meta"
                or not all(m.whole_layer_ops for m in _DISPATCH.modes)):
            return None
        return layer

    def _forward_packed(self, packed: PackedSequence, hx):
        """PackedSequence input: ``hx`` (in the caller's batch order) is sorted as the data is, and the
        final states sorted back; the output is packed like the input."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        sizes = [int(b) for b in batch_sizes.tolist()]
        if data.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.ndim}")
        self._check_input(data)
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        widths = (self.proj_size or self.hidden_size, self.hidden_size) if lstm else (self.hidden_size,)
        expected = [(self.num_layers * dirs, sizes[0] if sizes else 0, w) for w in widths]
        if hx is None:
            states = tuple(creation.zeros(e, dtype=data.dtype, device=data.device) for e in expected)
        else:
            states = tuple(hx) if lstm else (hx,)
            if sorted_indices is not None:
                states = tuple(s.index_select(1, sorted_indices) for s in states)
        for s, e, what in zip(states, expected, ("hidden[0]", "hidden[1]") if lstm else ("hidden",)):
            self._check_state(s, e, what)
        output, finals = self._run(data, states, sizes)
        if unsorted_indices is not None:
            finals = tuple(f.index_select(1, unsorted_indices) for f in finals)
        output = PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices)
        return output, (finals if lstm else finals[0])

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one state tensor ``h``."""

    _kind = "RNN"

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        input, batched = self._batched_input(input, self._kind)
        if hx is not None:
            want = 3 if batched else 2
            if hx.ndim != want:
                raise RuntimeError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx should also "
                                   f"be {want}-D but got {hx.ndim}-D tensor")
            hx = hx if batched else hx.unsqueeze(1)
        self._check_input(input)
        if hx is None:
            hx = self._zeros_state(input, self.hidden_size)
        self._check_state(hx, self._expected_state_shape(input, self.hidden_size))
        output, (h_n,) = self._run(input, (hx,))
        if not batched:
            return output.squeeze(0 if self.batch_first else 1), h_n.squeeze(1)
        return output, h_n


class RNN(_SingleStateRNN):
    """Elman RNN: ``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or relu), stacked and optionally bidirectional.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``.
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if self.nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(modes[self.nonlinearity], *args, **kwargs)


class GRU(_SingleStateRNN):
    """Gated recurrent unit, gates in PyTorch's order (reset, update, new).

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``.
    """

    _kind = "GRU"

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, gates in PyTorch's order (input, forget, cell, output); ``proj_size``
    adds the projection ``h = h W_hrᵀ``. Returns ``output, (h_n, c_n)``.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0)``.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        input, batched = self._batched_input(input, "LSTM")
        real_hidden = self.proj_size or self.hidden_size
        if hx is None:
            hx = (self._zeros_state(input, real_hidden), self._zeros_state(input, self.hidden_size))
        else:
            want = 3 if batched else 2
            if hx[0].ndim != want or hx[1].ndim != want:
                raise RuntimeError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx should "
                                   f"also be {want}-D but got ({hx[0].ndim}-D, {hx[1].ndim}-D) tensors")
            hx = tuple(hx) if batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self._check_input(input)
        self._check_state(hx[0], self._expected_state_shape(input, real_hidden), "hidden[0]")
        self._check_state(hx[1], self._expected_state_shape(input, self.hidden_size), "hidden[1]")
        output, (h_n, c_n) = self._run(input, hx)
        if not batched:
            return output.squeeze(0 if self.batch_first else 1), (h_n.squeeze(1), c_n.squeeze(1))
        return output, (h_n, c_n)


# ---------------------------------------------------------------- cells

class RNNCellBase(Module):
    """Parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` and the shared input handling."""

    _kind = "RNNCell"
    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty((gates, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(creation.empty((gates, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty((gates,), device=device, dtype=dtype))
            self.bias_hh = Parameter(creation.empty((gates,), device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.bias is not True:
            s += ", bias={bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _step(self, input: Tensor, state: tuple | None) -> tuple:
        """Validate ranks and sizes as PyTorch's cells do, run one step, restore unbatched shapes."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{self._kind}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if state is None:
            zeros = creation.zeros((x.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            state = (zeros,) * (2 if self._mode == "LSTM" else 1)
        else:
            state = tuple(s if batched else s.unsqueeze(0) for s in state)
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected {self.input_size}")
        for i, s in enumerate(state):
            if s.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{i} batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
        out = _STEPS[self._mode](F.linear(x, self.weight_ih, self.bias_ih), state, self.weight_hh, self.bias_hh)
        return out if batched else tuple(s.squeeze(0) for s in out)

    def _check_hidden_rank(self, hx: Tensor | None, what: str = "hidden") -> None:
        if hx is not None and hx.ndim not in (1, 2):
            raise ValueError(f"{self._kind}: Expected {what} to be 1D or 2D, got {hx.ndim}D instead")


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    @property
    def _mode(self) -> str:
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if self.nonlinearity not in modes:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return modes[self.nonlinearity]

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self._check_hidden_rank(hx)
        return self._step(input, None if hx is None else (hx,))[0]


class GRUCell(RNNCellBase):
    """One GRU step, gates in PyTorch's order (reset, update, new)."""

    _kind, _mode = "GRUCell", "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        self._check_hidden_rank(hx)
        return self._step(input, None if hx is None else (hx,))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    _kind, _mode = "LSTMCell", "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hx is not None:
            if isinstance(hx, Tensor):
                raise TypeError("lstm_cell(): argument 'hx' (position 2) must be tuple of Tensors, not Tensor")
            for i, h in enumerate(hx):
                self._check_hidden_rank(h, f"hx[{i}]")
        return self._step(input, hx)
