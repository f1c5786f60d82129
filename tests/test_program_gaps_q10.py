"""Gaps found by running vision and generative programs unchanged under ``install_aliases()``
(milesial/Pytorch-UNet, kuangliu/pytorch-cifar, eriklindernoren/PyTorch-GAN, facebookresearch/DiT),
each checked against real torch: the ``torch.cuda`` exception types a training script names in an
``except`` clause, ``Tensor.type(torch.Tensor)``, the words for a float in a size and for keys that
do not fit a tensor (a 0-d loss's ``.data[0]``), and the generator state after ``vgg19(pretrained=True)``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab

BOTH = pytest.mark.parametrize("m", [torch, tapelab], ids=["torch", "tapelab"])


# ---------------------------------------------------------------- torch.cuda exception types
@BOTH
def test_cuda_out_of_memory_error_is_torch_out_of_memory_error(m):
    """Pytorch-UNet's train.py wraps training in ``except torch.cuda.OutOfMemoryError``."""
    assert m.cuda.OutOfMemoryError is m.OutOfMemoryError
    assert issubclass(m.cuda.OutOfMemoryError, RuntimeError)
    with pytest.raises(AssertionError):
        try:
            raise AssertionError("not an OOM")
        except m.cuda.OutOfMemoryError:
            pytest.fail("an AssertionError was taken for an OutOfMemoryError")
    try:
        raise m.OutOfMemoryError("CUDA out of memory.")
    except m.cuda.OutOfMemoryError as e:
        assert str(e) == "CUDA out of memory."


@BOTH
def test_cuda_error_classes(m):
    assert issubclass(m.cuda.CudaError, RuntimeError)
    assert m.cuda.DeferredCudaCallError.__mro__[1] is Exception


# ---------------------------------------------------------------- Tensor.type(torch.Tensor)
def test_type_to_tensor_class_is_the_default_float_type():
    """PyTorch-GAN (srgan, esrgan...): ``imgs.type(Tensor)`` with ``Tensor = torch.Tensor`` on cpu."""
    for dt in ("float64", "float32"):
        got = {}
        for m in (torch, tapelab):
            old = m.get_default_dtype()
            m.set_default_dtype(getattr(m, dt))
            try:
                x = m.arange(3)
                y, z = x.type(m.Tensor), x.double().type(m.Tensor)
                got[m.__name__] = (str(y.dtype).split(".")[1], str(z.dtype).split(".")[1], y.tolist(), y.type(m.Tensor) is y)
            finally:
                m.set_default_dtype(old)
        assert got["tapelab"] == got["torch"]


@BOTH
@pytest.mark.parametrize("bad,kind", [("Parameter", ValueError), ("Module", ValueError), ("int", ValueError),
                                      ("float", ValueError), (3, TypeError)])
def test_type_to_other_classes_is_refused(m, bad, kind):
    target = {"Parameter": m.nn.Parameter, "Module": m.nn.Module, "int": int, "float": float}.get(bad, bad)
    match = f"invalid type: '{bad}'" if kind is ValueError else "dtype must be a type, str, or dtype object"
    with pytest.raises(kind, match=match):
        m.arange(3).type(target)


# ---------------------------------------------------------------- a float in a size
@pytest.mark.parametrize("call", ["empty((44.0, 3))", "empty([2.0])", "empty((None,))", "ones(2.0)", "empty('a')",
                                  "empty(3, 2.0)", "zeros([2, 2.5])", "randn(2, 1.0)", "full((2, 1.0), 1.0)",
                                  "empty(size=(2, 1.0))", "empty(size=(2.0,))"])
def test_non_int_size_element_message(call):
    """kuangliu's ShuffleNet builds ``nn.Conv2d(in_planes, out_planes/4, ...)``: a float size."""
    msgs = []
    for m in (torch, tapelab):
        with pytest.raises(TypeError) as e:
            eval(f"m.{call}")
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


def test_conv_with_float_channels_raises_torchs_error():
    msgs = []
    for m in (torch, tapelab):
        with pytest.raises(TypeError) as e:
            m.nn.Conv2d(24, 44.0, kernel_size=1, groups=2, bias=False)
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


# ---------------------------------------------------------------- keys that do not fit the tensor
_KEYS_0D = ["0", "1", "-1", "0:1", "0, ...", "..., 0", "None, 0", "slice(None),", "..., None, 0"]
_KEYS_2D = ["0, 0, 0", "5, 0, 0", "0, 5", "0, 1, :", ":, :, :", "..., 0, 0, 0", "0, ..., 0, 0", "True, 0, 0, 0",
            "0, 0, None, 0", "[0], 0, 0"]


def _index_errors(key: str, shape: tuple, write: bool) -> list:
    out = []
    for m in (torch, tapelab):
        x = m.zeros(shape)
        with pytest.raises(IndexError) as e:
            if write:
                exec(f"x[{key}] = 1.0")
            else:
                eval(f"x[{key}]")
        out.append(str(e.value))
    return out


@pytest.mark.parametrize("write", [False, True], ids=["get", "set"])
@pytest.mark.parametrize("key", _KEYS_0D)
def test_0d_tensor_index_errors_match_torch(key, write):
    """PyTorch-GAN's BEGAN reads ``(d_loss_real + torch.abs(diff)).data[0]`` (a 0-d tensor)."""
    got, want = _index_errors(key, (), write)[::-1]
    assert got == want


@pytest.mark.parametrize("write", [False, True], ids=["get", "set"])
@pytest.mark.parametrize("key", _KEYS_2D)
def test_too_many_indices_match_torch(key, write):
    got, want = _index_errors(key, (2, 3), write)[::-1]
    assert got == want


# ---------------------------------------------------------------- vgg(weights=...) and the RNG
def test_pretrained_vgg_skips_its_own_init(tmp_path, monkeypatch):
    """PyTorch-GAN's SRGAN builds ``vgg19(pretrained=True)`` before its DataLoader: torchvision's VGG
    builder passes ``init_weights=False`` with weights, so only the layers' constructors draw from
    the generator, and the shuffle order after it depends on that."""
    from tapelab.vision.models import VGG11_Weights, vgg11
    torch.manual_seed(0)     # torchvision's VGG-A layers, in order, without VGG's kaiming/normal init
    names, layers, c = [], [], 3
    for j, v in enumerate((64, 128, 256, 256, 512, 512, 512, 512)):
        layers.append(torch.nn.Conv2d(c, v, kernel_size=3, padding=1))
        names.append(f"features.{(0, 3, 6, 8, 11, 13, 16, 18)[j]}")
        c = v
    for j, (i, o) in enumerate(((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000))):
        layers.append(torch.nn.Linear(i, o))
        names.append(f"classifier.{3 * j}")
    want = torch.rand(3).tolist()
    weights = VGG11_Weights.IMAGENET1K_V1
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    state = {f"{n}.{k}": v for n, layer in zip(names, layers) for k, v in layer.state_dict().items()}
    torch.save(state, tmp_path / "hub" / "checkpoints" / weights.url.rsplit("/", 1)[1])
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    tapelab.manual_seed(0)
    model = vgg11(weights=weights)
    assert tapelab.rand(3).tolist() == want
    np.testing.assert_array_equal(model.classifier[6].bias.detach().numpy(), state["classifier.6.bias"].numpy())
