"""The weight and bias every quantized layer holds (static and dynamic), kept and checkpointed as PyTorch keeps
them: packed outside the parameter registry, exposed through methods, and written into a state dict under
PyTorch's keys (``weight``/``bias`` for convolutions, ``_packed_params._packed_params`` for linear layers), so
checkpoints move between the two libraries."""
from __future__ import annotations

from ....core.creation import tensor
from ....core.tensor import Tensor
from ....nn.modules.module import Module
from ...quantized_tensor import QuantizedTensor

_PACKED = "_packed_params."
_PACKED_VERSION = 3     # PyTorch's LinearPackedParams._version: its keys are "dtype" and "_packed_params"


class WeightBias(Module):
    """A layer holding a quantized ``_weight`` and a float ``_bias`` (or None); ``_PACKED_KEYS`` says whether its
    state dict names them as PyTorch's linear layers do (a ``LinearPackedParams`` child) or as its convolutions."""

    _PACKED_KEYS = False

    def weight(self) -> QuantizedTensor:
        return self._weight

    def bias(self) -> Tensor | None:
        return self._bias

    def set_weight_bias(self, w: QuantizedTensor, b: Tensor | None) -> None:
        # held outside the parameter registry, as PyTorch packs them: the float module's bias Parameter is kept
        # as it is (a checkpoint writes it as one) but is not this layer's parameter
        self.__dict__.update(_weight=w, _bias=b)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if not self._PACKED_KEYS:
            destination[prefix + "weight"], destination[prefix + "bias"] = self._weight, self._bias
        destination[prefix + "scale"] = tensor(float(getattr(self, "scale", 1.0)))
        destination[prefix + "zero_point"] = tensor(int(getattr(self, "zero_point", 0)))
        if self._PACKED_KEYS:
            if hasattr(destination, "_metadata"):   # PyTorch's LinearPackedParams child reads its version from here
                destination._metadata[prefix + _PACKED[:-1]] = {"version": _PACKED_VERSION}
            destination[prefix + _PACKED + "dtype"] = self._weight.dtype
            destination[prefix + _PACKED + "_packed_params"] = (self._weight, self._bias)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        names = ([_PACKED + "dtype", _PACKED + "_packed_params"] if self._PACKED_KEYS else ["weight", "bias"])
        names += ["scale", "zero_point"]
        absent = [prefix + n for n in names if prefix + n not in state_dict]
        if absent:
            if strict:
                missing_keys.extend(absent)
        else:
            values = {n: state_dict.pop(prefix + n) for n in names}
            w, b = values[_PACKED + "_packed_params"] if self._PACKED_KEYS else (values["weight"], values["bias"])
            self.set_weight_bias(w, b)
            if hasattr(self, "scale"):
                self.scale, self.zero_point = float(values["scale"]), int(values["zero_point"])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
