"""PyTorch's module surface that training scripts touch outside the engine: torch.accelerator,
torch.backends.*, torch.nn.parallel, torch.distributed, torch.utils.data.DistributedSampler and
torch.multiprocessing, checked against PyTorch itself (the oracle)."""
import multiprocessing
import os
import sys
import types

import numpy as np
import pytest
import torch

import tapelab


def _raises_like_torch(ours, theirs):
    """Both calls raise the same exception type with the same message."""
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(type(expected.value)) as got:
        ours()
    assert str(got.value) == str(expected.value)


# ---------------------------------------------------------------- accelerator
def test_accelerator_follows_tapelab_cuda():
    acc = tapelab.accelerator
    assert acc.is_available() == tapelab.cuda.is_available()
    assert acc.device_count() == tapelab.cuda.device_count()
    if acc.is_available():
        assert acc.current_accelerator() == tapelab.device("cuda")
        assert acc.current_accelerator(check_available=True) == tapelab.device("cuda")
        assert acc.current_device_index() == tapelab.cuda.current_device()
        acc.set_device_index(0)
        acc.set_device_index("cuda:0")
        acc.synchronize()
        with acc.device_index(0):
            assert acc.current_device_index() == 0
        with pytest.raises(ValueError, match="cpu doesn't match the current accelerator"):
            acc.set_device_index("cpu")
    else:
        assert acc.current_accelerator(check_available=True) is None


@pytest.mark.skipif(tapelab.cuda.is_available() or torch.accelerator.is_available(),
                    reason="compares the no-accelerator behaviour")
def test_without_an_accelerator_calls_raise_as_in_pytorch():
    acc = tapelab.accelerator
    for name, args in [("current_device_index", ()), ("synchronize", ()), ("set_device_index", (0,))]:
        _raises_like_torch(lambda: getattr(acc, name)(*args), lambda: getattr(torch.accelerator, name)(*args))
    with acc.device_index(None):  # None changes nothing, with or without a device
        pass
    if not tapelab.backends.cuda.is_built():
        assert acc.current_accelerator() is None and torch.accelerator.current_accelerator() is None


# ---------------------------------------------------------------- backends
@pytest.mark.parametrize("name", ["cudnn", "cuda", "mkldnn", "mps", "cpu"])
def test_backends_are_real_submodules(name):
    module = __import__(f"tapelab.backends.{name}", fromlist=["_"])
    assert isinstance(module, types.ModuleType) and sys.modules[f"tapelab.backends.{name}"] is module
    assert getattr(tapelab.backends, name) is module


def test_backend_flags_start_as_pytorchs_and_keep_what_scripts_set():
    import tapelab.backends.cudnn as cudnn
    import tapelab.backends.mkldnn as mkldnn
    for ours, theirs in [(cudnn, torch.backends.cudnn), (mkldnn, torch.backends.mkldnn)]:
        assert ours.enabled == theirs.enabled
    assert (cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
        (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32)
    for flag in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        assert getattr(tapelab.backends.cuda.matmul, flag) == getattr(torch.backends.cuda.matmul, flag)
    assert not (cudnn.is_available() or mkldnn.is_available() or tapelab.backends.mps.is_available())
    before = cudnn.benchmark
    try:
        cudnn.benchmark = True
        assert tapelab.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert (cudnn.enabled, cudnn.deterministic, cudnn.benchmark) == (False, True, False)
        assert (cudnn.enabled, cudnn.deterministic, cudnn.benchmark) == (True, False, True)
    finally:
        cudnn.benchmark = before
    tapelab.backends.cuda.enable_flash_sdp(False)
    assert tapelab.backends.cuda.flash_sdp_enabled() is False
    tapelab.backends.cuda.enable_flash_sdp(True)


# ---------------------------------------------------------------- nn.parallel
def _pair(seed=0):
    torch.manual_seed(seed)
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    ours = tapelab.nn.Sequential(tapelab.nn.Linear(4, 5), tapelab.nn.ReLU(), tapelab.nn.Linear(5, 2))
    ours.load_state_dict({k: tapelab.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def test_data_parallel_wraps_and_forwards_like_pytorch():
    ours, theirs = _pair()
    dp, tdp = tapelab.nn.DataParallel(ours), torch.nn.DataParallel(theirs)
    assert tapelab.nn.DataParallel is tapelab.nn.parallel.DataParallel and dp.module is ours
    assert list(dp.state_dict()) == list(tdp.state_dict()) and list(dp.state_dict())[0] == "module.0.weight"
    assert repr(dp).replace("tapelab", "torch") == repr(tdp)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    out = dp(tapelab.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), tdp(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    out.sum().backward()
    assert ours[0].weight.grad is not None
    fresh = tapelab.nn.DataParallel(_pair(1)[0])
    fresh.load_state_dict({k: tapelab.tensor(v.numpy()) for k, v in tdp.state_dict().items()})
    np.testing.assert_array_equal(fresh.module[0].weight.detach().numpy(), theirs[0].weight.detach().numpy())


def test_distributed_data_parallel_needs_a_process_group_as_in_pytorch():
    from tapelab.nn.parallel import DistributedDataParallel
    _raises_like_torch(lambda: DistributedDataParallel(tapelab.nn.Linear(2, 2)),
                       lambda: torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2)))


# ---------------------------------------------------------------- distributed
def test_distributed_without_a_process_group():
    import tapelab.distributed as dist
    from tapelab.distributed import ReduceOp, destroy_process_group, init_process_group  # noqa: F401 (as scripts do)
    assert dist.is_available() == torch.distributed.is_available()
    assert dist.is_initialized() is False and torch.distributed.is_initialized() is False
    for name in ("get_rank", "get_world_size", "barrier"):
        _raises_like_torch(getattr(dist, name), getattr(torch.distributed, name))
    _raises_like_torch(lambda: dist.all_reduce(tapelab.ones(1), op=ReduceOp.SUM),
                       lambda: torch.distributed.all_reduce(torch.ones(1), op=torch.distributed.ReduceOp.SUM))
    _raises_like_torch(dist.destroy_process_group, torch.distributed.destroy_process_group)
    assert str(ReduceOp.SUM) == str(torch.distributed.ReduceOp.SUM)


def test_torchelastic_launch_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert tapelab.distributed.is_torchelastic_launched() is torch.distributed.is_torchelastic_launched() is False
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "42")
    assert tapelab.distributed.is_torchelastic_launched() is torch.distributed.is_torchelastic_launched() is True


# ---------------------------------------------------------------- DistributedSampler
CONFIGS = [(10, 3, False), (10, 3, True), (9, 3, False), (9, 3, True), (2, 4, False), (2, 4, True), (7, 1, False),
           (1, 5, False), (13, 4, True), (13, 4, False)]


@pytest.mark.parametrize("n,replicas,drop_last", CONFIGS)
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_matches_pytorch(n, replicas, drop_last, shuffle):
    from tapelab.utils.data.distributed import DistributedSampler
    data = list(range(n))
    seen = []
    for rank in range(replicas):
        ours = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=7, drop_last=drop_last)
        theirs = torch.utils.data.distributed.DistributedSampler(data, num_replicas=replicas, rank=rank,
                                                                 shuffle=shuffle, seed=7, drop_last=drop_last)
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
        seen += list(ours)
    if drop_last:
        assert len(set(seen)) == len(seen)  # each index goes to at most one replica
    else:
        assert set(seen) == set(data)  # every index goes to some replica


@pytest.mark.parametrize("seed", [0, 1, 42, 123456789, 2 ** 33 + 5, -3])
def test_distributed_sampler_permutes_as_pytorch_for_every_seed(seed):
    from tapelab.utils.data.distributed import torch_permutation
    for n in (0, 1, 2, 3, 17, 1000, 50_000):
        expected = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
        assert torch_permutation(n, seed) == expected, (n, seed)


def test_distributed_sampler_shuffles_per_epoch_and_checks_its_arguments():
    from tapelab.utils.data import DataLoader, DistributedSampler
    data = list(range(20))
    s = DistributedSampler(data, num_replicas=2, rank=0)
    first = list(s)
    assert list(s) == first
    s.set_epoch(1)
    other = DistributedSampler(data, num_replicas=2, rank=1)
    other.set_epoch(1)
    assert list(s) != first and sorted(list(s) + list(other)) == data
    batches = [b.tolist() for b in DataLoader(tapelab.arange(20), batch_size=4, sampler=s)]
    assert sum(batches, []) == list(s)
    _raises_like_torch(lambda: DistributedSampler(data, num_replicas=2, rank=2),
                       lambda: torch.utils.data.distributed.DistributedSampler(data, num_replicas=2, rank=2))
    _raises_like_torch(lambda: DistributedSampler(data), lambda: torch.utils.data.distributed.DistributedSampler(data))


# ---------------------------------------------------------------- multiprocessing
def test_multiprocessing_offers_pythons_api_and_pytorchs_additions():
    mp = tapelab.multiprocessing
    assert all(hasattr(mp, name) for name in multiprocessing.__all__)
    assert mp.get_context is not None and mp.Queue is not None and mp.Process is multiprocessing.Process
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    before = mp.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy(before)


def _write_rank(rank, folder):
    with open(os.path.join(folder, f"rank{rank}"), "w") as f:
        f.write(str(rank))


def _fail_on_rank_one(rank):
    if rank == 1:
        raise SystemExit(3)


def test_spawn_runs_each_rank_and_reports_failures(tmp_path):
    mp = tapelab.multiprocessing
    assert mp.spawn(_write_rank, args=(str(tmp_path),), nprocs=2, start_method="fork") is None
    assert sorted(os.listdir(tmp_path)) == ["rank0", "rank1"]
    ctx = mp.spawn(_write_rank, args=(str(tmp_path / "x"),), nprocs=1, join=False, start_method="fork")
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 1"):
        ctx.join()  # the folder does not exist, so the child fails
    with pytest.raises(mp.ProcessExitedException, match="process 1 terminated with exit code 3") as info:
        mp.spawn(_fail_on_rank_one, nprocs=2, start_method="fork")
    assert info.value.error_index == 1 and info.value.exit_code == 3


def test_data_parallel_on_one_cuda_device(monkeypatch):
    """On the simulated cuda:0: the module moves there, inputs follow, parameters elsewhere are an error."""
    from tapelab._backend import simulated_cuda
    monkeypatch.setattr(tapelab.base.device, "cuda_available", lambda: True)   # what DataParallel asks
    monkeypatch.setattr(tapelab.base.device, "cuda_device_count", lambda: 1)
    with simulated_cuda(0):
        linear = tapelab.nn.Linear(3, 2)
        dp = tapelab.nn.DataParallel(linear)
        assert dp.device_ids == [0] and linear.weight.device == tapelab.device("cuda:0")
        out = dp(tapelab.ones(4, 3))
        assert out.device == tapelab.device("cuda:0") and out.shape == (4, 2)
        out.sum().backward()
        assert linear.weight.grad.device == tapelab.device("cuda:0")
        with pytest.warns(UserWarning, match="runs the whole batch on cuda:0"):
            dp = tapelab.nn.DataParallel(tapelab.nn.Linear(3, 2), device_ids=[0, 1])
        with pytest.raises(RuntimeError, match=r"parameters and buffers on device cuda:0 \(device_ids\[0\]\) but "
                                               "found one of them on device: cpu"):
            dp(tapelab.ones(1, 3))
