"""Gaps found by running tutorial repositories unchanged under ``install_aliases()`` and diffing what
they print against real torch: yunjey's pytorch-tutorial (basics, CNN/RNN/BiRNN/ResNet on MNIST and
CIFAR-10, the LSTM language model with ``multinomial`` sampling, GAN, VAE, neural style transfer, image
captioning's train and sample) and d2l-en's torch library driven by its chapter programs (linear
regression and weight decay, softmax regression, MLPs with dropout, LeNet, RNN/GRU language models,
attention and the Transformer encoder), and pytorch/tutorials' beginner scripts that need no download
(the 60-minute blitz's neural networks, autograd and tensor quickstarts, build-model, a custom
``autograd.Function``, the dynamic net). Each test states the behaviour on its own, with both torch and
tapelab imported, and compares real values."""
from __future__ import annotations

import os
import warnings

import pytest
import torch

import tapelab


# ---------------------------------------------------------------- lazy convolutions draw no numbers
def _draws_after_lazy(m, make) -> tuple:
    m.manual_seed(0)
    layer = make(m)
    nd = int(type(layer).__name__[-2])
    layer(m.ones((1, 2) + (6,) * nd))
    return [p.detach().numpy().copy() for p in layer.parameters()], m.rand(3).numpy()


@pytest.mark.parametrize("make", [
    lambda m: m.nn.LazyConv1d(3, 2), lambda m: m.nn.LazyConv2d(3, 3, padding=1),
    lambda m: m.nn.LazyConv3d(2, 2, bias=False), lambda m: m.nn.LazyConv2d(4, 3, groups=2),
    lambda m: m.nn.LazyConvTranspose1d(3, 2), lambda m: m.nn.LazyConvTranspose2d(2, 3, stride=2),
    lambda m: m.nn.LazyConvTranspose3d(2, 2)])
def test_lazy_conv_initialises_with_torch_numbers(make):
    """A lazy convolution's constructor ran the eager one with ``in_channels=groups`` and so drew a
    throwaway kaiming init from the generator: d2l's LeNet (LazyConv2d, then ``init_cnn``) and every
    draw after it (data order, dropout) differed from PyTorch's under the same seed."""
    got_params, got_next = _draws_after_lazy(tapelab, make)
    want_params, want_next = _draws_after_lazy(torch, make)
    assert [p.shape for p in got_params] == [p.shape for p in want_params]
    for g, w in zip(got_params, want_params):
        assert (g == w).all()
    assert (got_next == want_next).all()


def test_lazy_lenet_then_xavier_matches_torch():
    """d2l's LeNet: lazy layers materialised by one forward, then ``xavier_uniform_`` on the eager
    types they became; the output of the next forward is torch's."""
    def run(m):
        nn = m.nn
        m.manual_seed(0)
        net = nn.Sequential(nn.LazyConv2d(6, kernel_size=5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2, 2),
                            nn.LazyConv2d(16, kernel_size=5), nn.Sigmoid(), nn.AvgPool2d(2, 2), nn.Flatten(),
                            nn.LazyLinear(12), nn.Sigmoid(), nn.LazyLinear(10))
        x = m.rand(4, 1, 28, 28)
        net(x)
        net.apply(lambda mod: nn.init.xavier_uniform_(mod.weight) if type(mod) in (nn.Linear, nn.Conv2d) else None)
        return net(x).detach().numpy()
    assert abs(run(tapelab) - run(torch)).max() < 1e-5


def test_lazy_conv_checks_groups_when_materialised():
    for m in (tapelab, torch):
        layer = m.nn.LazyConv2d(4, 3, groups=2)
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            layer(m.ones(1, 3, 5, 5))


# ---------------------------------------------------------------- DataLoader's worker-count warning
def _worker_warnings(m, num_workers: int, passes: int) -> list:
    ds = m.utils.data.TensorDataset(m.arange(4.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = m.utils.data.DataLoader(ds, batch_size=2, num_workers=num_workers)
        batches = [[b[0].tolist() for b in loader] for _ in range(passes)]
    return batches, [(w.category, str(w.message), os.path.basename(w.filename)) for w in caught
                     if "worker processes" in str(w.message)]


@pytest.mark.parametrize("extra", [0, 1])
def test_dataloader_warns_about_more_workers_than_cpus(extra):
    """d2l's DataModule asks for 4 workers: PyTorch warns at construction and at each pass when that is
    more than the CPUs this process may use (programs print it twice); tapelab said nothing."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = cpus + extra
    got_batches, got = _worker_warnings(tapelab, n, 2)
    want_batches, want = _worker_warnings(torch, n, 2)
    assert got_batches == want_batches
    assert [w[:2] for w in got] == [w[:2] for w in want]
    assert len(got) == (3 if extra else 0)
    assert {w[2] for w in got} == ({"dataloader.py"} if extra else set())   # attributed to the loader


def test_dataloader_without_workers_never_warns():
    assert _worker_warnings(tapelab, 0, 1)[1] == _worker_warnings(torch, 0, 1)[1] == []
    assert hasattr(tapelab.utils.data.DataLoader, "check_worker_number_rationality")


# ---------------------------------------------------------------- pretrained weights: the download line
def test_load_state_dict_from_url_prints_the_download_line(tmp_path, capsys):
    """yunjey's basics (``resnet18(pretrained=True)``) print PyTorch's ``Downloading: "<url>" to <file>``
    on stdout before fetching, and nothing once the file is cached."""
    src = tmp_path / "lin.pth"
    torch.save(torch.nn.Linear(2, 1).state_dict(), src)
    lines = []
    for m, folder in ((torch, "cache_torch"), (tapelab, "cache_tapelab")):
        model_dir = tmp_path / folder
        for _ in range(2):   # the second call reads the cached file
            state = m.hub.load_state_dict_from_url(src.as_uri(), model_dir=str(model_dir), progress=False)
        assert sorted(state) == ["bias", "weight"]
        lines.append(capsys.readouterr().out.replace(str(model_dir), "<dir>"))
    assert lines[0] == lines[1] == f'Downloading: "{src.as_uri()}" to <dir>/lin.pth\n'
