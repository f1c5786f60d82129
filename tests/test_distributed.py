"""tapelab.distributed with real ranks under MPI (mpiexec from the mpich wheel, the 'mpi' extra).

Each job is small and runs once per module: ``programs/ddp_checks.py`` (collectives, DDP,
no_sync, the comm hooks, Join on uneven inputs, static_graph, gradient_as_bucket_view, ZeRO,
RemoteModule, distributed autograd with DistributedOptimizer and RPC timeouts, the profiler's
collectives) with 2 ranks (and 4 with --long),
``programs/ddp_nccl.py`` (the nccl backend on a stand-in for cupy's NCCL) with 2 ranks, ``programs/ddp_train.py`` (a PyTorch DDP script) with 4 ranks under the launcher,
and ``programs/ddp_fail.py`` for a rank that raises or is killed. PyTorch, in this process, is
the oracle: single-process training on the concatenated batches.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("mpi4py", reason="tapelab.distributed needs the 'mpi' extra (mpi4py, mpich)")

import tapelab  # noqa: E402
from tapelab.distributed.run import mpiexec  # noqa: E402

PROGRAMS = Path(__file__).parent / "programs"
TIMEOUT = 240


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", MPIEXEC_TIMEOUT=str(TIMEOUT))


def _mpirun(n: int, program: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", str(PROGRAMS / program), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 30, env=_env())


def _launch(n: int, program: str, *args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tapelab.distributed.run", "--nproc_per_node", str(n), "--timeout", str(timeout),
           str(PROGRAMS / program), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, env=_env())


# ---------------------------------------------------------------- the oracle
def _torch_mlp():
    from programs.ddp_checks import D_HID, D_IN, D_OUT, weights
    net = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HID), torch.nn.Tanh(), torch.nn.Linear(D_HID, D_OUT))
    with torch.no_grad():
        for p, w in zip(net.parameters(), weights()):
            p.copy_(torch.from_numpy(w))
    return net


def _torch_reference(n: int):
    from programs.ddp_checks import STEPS, data
    xs, ys = data(n)
    net = _torch_mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(torch.from_numpy(xs[s])), torch.from_numpy(ys[s])).backward()
        opt.step()
    acc = _torch_mlp()
    torch.nn.functional.mse_loss(acc(torch.from_numpy(xs[0])), torch.from_numpy(ys[0]), reduction="sum").backward()
    return [p.detach().numpy() for p in net.parameters()], [p.grad.numpy() / n for p in acc.parameters()]


@pytest.fixture(scope="module", params=[2, 4])
def job(request, tmp_path_factory):
    if request.param == 4 and not request.config.getoption("--long"):
        pytest.skip("the 4-rank run of ddp_checks is in --long (ddp_train runs 4 ranks by default)")
    out = tmp_path_factory.mktemp(f"ddp{request.param}")
    done = _mpirun(request.param, "ddp_checks.py", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    arrays = np.load(out / "ddp.npz")
    return res, [arrays[f"arr_{i}"] for i in range(len(arrays.files))]


def test_collectives(job):
    res, _ = job
    n = res["world"]
    assert res["collectives"]["all_reduce"] == [n * (n + 1) / 2] * 2
    assert res["collectives"]["objects"] == [{"rank": r} for r in range(n)]
    assert res["collectives"]["completed"] is True


def test_ddp_equals_one_process_on_the_concatenated_batch(job):
    res, arrays = job
    params, _ = _torch_reference(res["world"])
    assert res["buckets"] == 4      # several buckets, launched while backward runs
    for got, want in zip(arrays[:4], params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_no_sync_accumulates_then_reduces_the_sum(job):
    res, arrays = job
    _, grads = _torch_reference(res["world"])
    assert res["no_sync_local_differs"]       # the ranks' local sums differ before the synced step
    for got, want in zip(arrays[4:], grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cuda_tensors_over_mpi_on_the_simulated_device(job):
    res, _ = job
    n = res["world"]
    assert res["cuda"]["all_reduce"] == [n * (n + 1) / 2] * 2
    assert res["cuda"]["device"] == "cuda:0" and res["cuda"]["max_diff"] < 1e-6


def test_find_unused_parameters(job):
    res, _ = job
    found = res["find_unused"]
    assert found["unused_grad_none"]
    from programs.ddp_checks import PER_RANK, data
    xs, ys = data(res["world"])
    net = _torch_mlp()
    # each rank's mean loss over its own 4 samples, averaged: the mean over all of batch 0
    torch.nn.functional.mse_loss(net(torch.from_numpy(xs[0])), torch.from_numpy(ys[0])).backward()
    assert PER_RANK * res["world"] == xs.shape[1]
    for got, p in zip(found["used_grad"], net.parameters()):
        np.testing.assert_allclose(np.array(got, np.float32), p.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert "Expected to have finished reduction in the prior iteration" in found["strict_error"]
    assert "find_unused_parameters=True" in found["strict_error"]


def test_comm_hooks_traffic_and_convergence(job):
    hooks = job[0]["hooks"]
    full = hooks["allreduce"]["bytes"]
    assert full == 4 * (16 * 6 + 16 + 3 * 16 + 3)              # every float32 gradient, once
    assert hooks["fp16"]["bytes"] == hooks["bf16"]["bytes"] == full // 2
    assert hooks["powerSGD"]["bytes"] < full                   # rank-2 factors of the 16x6 and 3x16 matrices
    for name, h in hooks.items():
        assert h["last"] < 0.1 * h["first"], (name, h)          # each still trains
        assert abs(h["last"] - hooks["allreduce"]["last"]) < 0.01, (name, h)


def test_profiler_records_collectives(job):
    prof = job[0]["profiler"]
    assert prof["collectives"] == 4 and prof["backward"] > 0


def test_zero_shards_state_and_matches_adam(job):
    zero, n = job[0]["zero"], job[0]["world"]
    assert zero["max_diff"] < 1e-6 and zero["state_matches"] < 1e-6
    assert sum(zero["held_per_rank"]) == zero["total"]
    assert max(zero["held_per_rank"]) <= zero["total"] / n + 16 * 6 * 2   # about 1/N: one matrix of slack


def test_join_trains_on_uneven_inputs_as_pytorch(job):
    """Rank r has r + 1 batches. PyTorch's Join: iteration k sums the gradients of the ranks still
    training (the others add zeros) and divides by the world size (or, with
    ``divide_by_initial_world_size=False``, by the ranks still training); at the end every rank
    holds the last joiner's model."""
    from programs.ddp_checks import join_data
    res = job[0]
    n, join = res["world"], res["join"]
    x, y = join_data(n)
    for key, divisor in (("params", lambda k: n), ("params_by_active", lambda k: n - k)):
        net = _torch_mlp()
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        for k in range(n):
            opt.zero_grad()
            sum(torch.nn.functional.mse_loss(net(torch.from_numpy(x[k, r])), torch.from_numpy(y[k, r]))
                for r in range(k, n)).div(divisor(k)).backward()
            opt.step()
        for got, want in zip(join[key], net.parameters()):
            np.testing.assert_allclose(np.array(got, np.float32), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert join["spread"] == 0.0
    assert join["throw"] == ["Rank 0 exhausted all inputs."] + \
        ["Detected at least one rank that exhausted inputs. Throwing across all ranks."] * (n - 1)


def test_static_graph_searches_unused_parameters_once(job):
    static, search = job[0]["static_graph"]["static"], job[0]["static_graph"]["search"]
    assert static["all_reduces"] == [2, 1, 1]      # one bucket, plus the used flags in the first iteration only
    assert search["all_reduces"] == [2, 2, 2]      # find_unused_parameters: the flags every iteration
    assert static["unused_grad_none"] and search["unused_grad_none"]
    for a, b in zip(static["grads"], search["grads"]):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_gradient_as_bucket_view_selects_views_or_copies(job):
    views, copies = job[0]["bucket_view"]["True"], job[0]["bucket_view"]["False"]
    assert views["bases"] == 1 and not views["none"]     # every .grad a view of the one bucket
    assert copies["bases"] == 1 and copies["none"]       # every .grad its own tensor
    assert views["grads"] == copies["grads"]


def test_rpc_timeout_raises_pytorchs_error(job):
    t = job[0]["rpc_timeout"]
    assert t["error"] == "RPC ran for more than set timeout (200 ms) and will now be marked with an error"
    assert t["async_error"] == "RPC ran for more than set timeout (100 ms) and will now be marked with an error"
    assert t["waited"] < 0.6 and t["after"] == 5     # not the 0.8 s call; the late replies are dropped


def test_dist_autograd_and_distributed_optimizer_equal_local_training(job):
    """Two steps of a remote Linear (on the last rank) under a local head: gradients in the
    context only (``.grad`` untouched on both workers), DistributedOptimizer(SGD) on each owner;
    the same parameters as the same model trained in one process."""
    d = job[0]["dist_autograd"]
    assert d["remote"] == 0.0 and d["local"] == 0.0
    assert d["local_grads"] == [[1], [1, 3]] and d["grad_untouched"]


def test_remote_module_forward_backward_equal_local(job):
    remote = job[0]["remote"]
    assert remote == {"forward": 0.0, "input_grad": 0.0, "param_grads": 0.0, "async": 0.0}


# ---------------------------------------------------------------- the nccl backend, on CPU
def test_nccl_backend_collectives_and_ddp_on_stand_ins(tmp_path):
    """engine/_c10d/nccl.py as it runs on GPUs, but over programs/ddp_fake_nccl.py: NCCL's calls
    (pointers, counts, type and op codes, a stream) carried out over MPI by 2 real ranks, on the
    simulated cuda device; each rank's communicator on its own device (LOCAL_RANK)."""
    done = _mpirun(2, "ddp_nccl.py", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = json.loads((tmp_path / "nccl.json").read_text())
    assert res["backend"] == "nccl" and res["devices"] == [0, 1]
    c = res["collectives"]
    assert c["all_reduce"] == [3.0] * 3 and c["max"] == [2.0] * 2 and c["avg"] == [1.5] * 2
    assert c["half"] == [[3.0, 3.0], "tapelab.float16"]
    assert c["reduce"] == [1.0, 1.0]                                  # rank 0 is not the destination
    assert c["broadcast"] == [10, 11, 12, 13]
    assert c["all_gather"] == [[0.0, 0.0], [1.0, 1.0]] and c["all_gather_into_tensor"] == [0.0, 0.0, 1.0, 1.0]
    assert c["reduce_scatter"] == [1.0, 1.0]                          # rank 0's chunk: 0 + 1
    assert c["reduce_scatter_tensor"] == [0.0, 2.0]
    assert c["gather"] == [[0.0], [1.0]] and c["scatter"] == [100.0] and c["all_to_all"] == [[0.0], [10.0]]
    assert c["recv"] == [[7.0, 7.0], "cuda:0"]
    ddp = res["ddp"]
    assert ddp["grad_device"] == "cuda:0" and ddp["broadcasts"] == 4   # the parameters from rank 0
    from programs.ddp_checks import STEPS
    assert ddp["all_reduces"] == ddp["buckets"] * STEPS and ddp["floats_reduced"] == STEPS * (16 * 6 + 16 + 3 * 16 + 3)
    params, _ = _torch_reference(2)
    got = np.load(tmp_path / "nccl.npz")
    for i, want in enumerate(params):
        np.testing.assert_allclose(got[f"arr_{i}"], want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- the launcher
def test_pytorch_ddp_script_runs_unchanged_under_the_launcher(tmp_path):
    done = _launch(4, "ddp_train.py", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "epoch 1: loss" in done.stdout
    got = np.load(tmp_path / "trained.npz")
    # PyTorch in one process: the 4 ranks' batches of 4 (DistributedSampler, no shuffle) are 16
    # consecutive samples
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)).astype(np.float32)).astype(np.float32)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(2):
        for b in range(4):
            opt.zero_grad()
            sl = slice(16 * b, 16 * (b + 1))
            torch.nn.MSELoss()(net(torch.from_numpy(x[sl])), torch.from_numpy(y[sl])).backward()
            opt.step()
    for i, p in enumerate(net.parameters()):
        np.testing.assert_allclose(got[f"arr_{i}"], p.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_failing_rank_fails_the_job_and_is_named(how):
    done = _launch(2, "ddp_fail.py", how, "1", timeout=60)
    assert done.returncode != 0
    report = done.stderr[done.stderr.index("tapelab.distributed.run: the job failed"):]
    if how == "raise":
        assert "rank 1 (local_rank 1) failed with:" in report
        assert "ValueError: rank 1 found a bad batch" in report and "ddp_fail.py" in report
    else:
        assert "rank 1 (pid" in report and "was killed by signal 9" in report


def test_a_hanging_rank_ends_at_the_timeout(request):
    if not request.config.getoption("--long"):
        pytest.skip("waits for a 15 s timeout: in --long")
    done = _launch(2, "ddp_fail.py", "hang", "1", timeout=15)
    assert done.returncode != 0
    assert "the job did not finish within the timeout of 15 s; ranks still running: [0, 1]" in done.stderr


# ---------------------------------------------------------------- without ranks
def test_without_a_group_the_collectives_raise_pytorchs_error():
    dist = tapelab.distributed
    assert not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, dist.barrier, lambda: dist.all_reduce(tapelab.ones(2))):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            call()
    with pytest.raises(TypeError, match="all_reduce: invalid function argument. Expected parameter `tensor`"):
        dist.all_reduce([1.0])


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_shards_as_pytorch(shuffle, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    data = list(range(10))
    for n in (3, 4):
        ours = [list(tapelab.utils.data.DistributedSampler(data, n, r, shuffle, seed=1, drop_last=drop_last))
                for r in range(n)]
        theirs = [list(TorchSampler(data, n, r, shuffle, seed=1, drop_last=drop_last)) for r in range(n)]
        assert ours == theirs   # shuffled too: the sampler permutes with PyTorch's own algorithm


_SAME_SIGNATURE = {
    "torch.distributed": ["init_process_group", "destroy_process_group", "get_rank", "get_world_size",
                          "is_initialized", "barrier", "all_reduce", "reduce", "broadcast", "all_gather",
                          "all_gather_into_tensor", "gather", "scatter", "reduce_scatter", "reduce_scatter_tensor",
                          "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv", "new_group",
                          "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list"],
    "torch.distributed.algorithms.ddp_comm_hooks.default_hooks": ["allreduce_hook", "fp16_compress_hook",
                                                                  "bf16_compress_hook"],
    "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook": ["PowerSGDState", "powerSGD_hook"],
    "torch.distributed.optim": ["ZeroRedundancyOptimizer", "DistributedOptimizer"],
    "torch.distributed.rpc": ["init_rpc", "rpc_sync", "rpc_async", "remote", "shutdown", "get_worker_info",
                              "TensorPipeRpcBackendOptions"],
    "torch.distributed.algorithms": ["Join"],
    "torch.distributed.nn": ["RemoteModule"],
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # torch.distributed.nn imports torch.jit
@pytest.mark.parametrize("module", sorted(_SAME_SIGNATURE))
def test_names_at_pytorchs_paths_take_pytorchs_arguments(module):
    """A script's calls bind the same way: the same parameter names in the same order (PyTorch's
    private ones, with a leading underscore, left out)."""
    import importlib
    import inspect
    theirs, ours = importlib.import_module(module), importlib.import_module(module.replace("torch", "tapelab", 1))
    for name in _SAME_SIGNATURE[module]:
        want = [p for p in inspect.signature(getattr(theirs, name)).parameters if not p.startswith("_")]
        assert list(inspect.signature(getattr(ours, name)).parameters) == want, f"{module}.{name}"


def test_launcher_accepts_torchruns_spellings():
    from tapelab.distributed.run import _parser
    for flag in ("--nproc-per-node", "--nproc_per_node"):
        ns = _parser().parse_args([flag, "3", "train.py", "--lr", "0.1"])
        assert (ns.nproc, ns.script, ns.args) == (3, "train.py", ["--lr", "0.1"])


@pytest.mark.skipif(not tapelab.distributed.is_nccl_available(), reason="needs a CUDA GPU and cupy's NCCL")
def test_nccl_all_reduce_on_one_gpu(tmp_path):
    script = tmp_path / "nccl.py"
    script.write_text("import tapelab as t\nd = t.distributed\nd.init_process_group('nccl')\n"
                      "x = t.ones(4, device='cuda') * (d.get_rank() + 1)\nd.all_reduce(x)\n"
                      "assert x.cpu().tolist() == [1.0] * 4, x\nd.destroy_process_group()\n")
    done = subprocess.run([mpiexec(), "-n", "1", sys.executable, "-m", "mpi4py", str(script)], capture_output=True,
                          text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
