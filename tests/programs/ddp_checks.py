"""What tests/test_distributed.py checks inside a job of N ranks (run under mpiexec).

Rank 0 writes ``results.json`` and ``ddp.npz`` into the folder given as argv[1]; the test
compares them with PyTorch run in one process. Data and weights come from numpy, so every rank
and the oracle start from the same values.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import tapelab as torch
from tapelab import events
from tapelab._backend import simulated_cuda
from tapelab.distributed import autograd as dist_autograd
from tapelab.distributed import rpc
from tapelab.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from tapelab.distributed.nn import RemoteModule
from tapelab.distributed.optim import DistributedOptimizer, ZeroRedundancyOptimizer
from tapelab.nn.parallel import DistributedDataParallel as DDP

dist = torch.distributed
PER_RANK, D_IN, D_HID, D_OUT, STEPS = 4, 6, 16, 3, 3


def weights(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-.4, .4, s).astype(np.float32) for s in ((D_HID, D_IN), (D_HID,), (D_OUT, D_HID), (D_OUT,))]


def mlp(seed: int = 0):
    net = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HID), torch.nn.Tanh(), torch.nn.Linear(D_HID, D_OUT))
    with torch.no_grad():
        for p, w in zip(net.parameters(), weights(seed)):
            p.copy_(torch.from_numpy(w))
    return net


def data(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((STEPS, PER_RANK * n, D_IN)).astype(np.float32)
    return x, np.tanh(x @ rng.standard_normal((D_IN, D_OUT)).astype(np.float32))


class Seeded(torch.nn.Linear):
    """A Linear with numpy weights, built on the RemoteModule's owner."""

    def __init__(self):
        super().__init__(D_IN, D_OUT)
        with torch.no_grad():
            self.weight.copy_(torch.from_numpy(weights(3)[2][:, :D_IN].copy()))
            self.bias.copy_(torch.from_numpy(weights(3)[3]))


def join_data(n: int, seed: int = 7):
    """Uneven inputs: rank r trains on ``x[k, r]`` for k < r + 1 (rank 0 one batch, the last n)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n, PER_RANK, D_IN)).astype(np.float32)
    return x, np.tanh(x @ rng.standard_normal((D_IN, D_OUT)).astype(np.float32))


def params_of(key: str):
    """On the owner: the RemoteModule's parameters (and whether any has a .grad)."""
    module = rpc.agent._agent().owned[key]
    return [p.detach().numpy().copy() for p in module.parameters()], any(p.grad is not None for p in module.parameters())


def grads_of(key: str):
    """On the owner: the .grad of the RemoteModule's parameters."""
    module = rpc.agent._agent().owned[key]
    return [p.grad.numpy().copy() for p in module.parameters()]


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    res: dict = {"world": n}
    mine = slice(r * PER_RANK, (r + 1) * PER_RANK)
    xs, ys = data(n)

    # collectives and object collectives
    t = torch.full((2,), float(r + 1))
    dist.all_reduce(t)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r})
    w = dist.all_reduce(torch.ones(3, dtype=torch.bfloat16), op=dist.ReduceOp.SUM, async_op=True)
    w.wait()
    res["collectives"] = {"all_reduce": t.tolist(), "objects": objs, "completed": w.is_completed()}

    # DDP: 3 SGD steps on this rank's share of each batch, with small buckets (several per backward)
    model = DDP(mlp(), bucket_cap_mb=200 / 2**20)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(torch.from_numpy(xs[s][mine])), torch.from_numpy(ys[s][mine])).backward()
        opt.step()
    ddp_params = [p.detach().numpy().copy() for p in model.module.parameters()]
    res["buckets"] = len(model._buckets_of)

    # no_sync: the first half-batch accumulates locally, the second reduces the sum
    acc = DDP(mlp())
    half = PER_RANK // 2
    x0, y0 = torch.from_numpy(xs[0][mine]), torch.from_numpy(ys[0][mine])
    with acc.no_sync():
        torch.nn.functional.mse_loss(acc(x0[:half]), y0[:half], reduction="sum").backward()
    local = [p.grad.numpy().copy() for p in acc.parameters()]
    torch.nn.functional.mse_loss(acc(x0[half:]), y0[half:], reduction="sum").backward()
    nosync_grads = [p.grad.numpy().copy() for p in acc.parameters()]
    gathered = [None] * n
    dist.all_gather_object(gathered, local)
    res["no_sync_local_differs"] = bool(any(not np.allclose(a, b) for a, b in zip(gathered[0], gathered[-1])))

    # find_unused_parameters: a branch no rank uses keeps .grad None; without it, DDP says so
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = mlp(), torch.nn.Linear(D_IN, D_OUT)

        def forward(self, x):
            return self.used(x)
    br = DDP(Branchy(), find_unused_parameters=True)
    torch.nn.functional.mse_loss(br(x0), y0).backward()
    res["find_unused"] = {"unused_grad_none": br.module.unused.weight.grad is None,
                          "used_grad": [p.grad.numpy().copy() for p in br.module.used.parameters()]}
    strict = DDP(Branchy())
    torch.nn.functional.mse_loss(strict(x0), y0).backward()
    try:
        strict(x0)
        res["find_unused"]["strict_error"] = ""
    except RuntimeError as e:
        res["find_unused"]["strict_error"] = str(e)
    res["find_unused"]["used_grad"] = [g.tolist() for g in res["find_unused"]["used_grad"]]

    # Join: rank r has r + 1 batches; the ranks out of batches shadow the others' all-reduces
    jx, jy = join_data(n)
    jm = DDP(mlp())
    jo = torch.optim.SGD(jm.parameters(), lr=0.5)
    with jm.join():
        for k in range(r + 1):
            jo.zero_grad()
            torch.nn.functional.mse_loss(jm(torch.from_numpy(jx[k, r])), torch.from_numpy(jy[k, r])).backward()
            jo.step()
    mine_params = [p.detach().numpy().copy() for p in jm.parameters()]
    everyone = [None] * n
    dist.all_gather_object(everyone, mine_params)
    res["join"] = {"spread": max(float(np.abs(a - b).max()) for ps in everyone for a, b in zip(ps, everyone[0])),
                   "params": [a.tolist() for a in mine_params]}
    jm = DDP(mlp())
    jo = torch.optim.SGD(jm.parameters(), lr=0.5)
    with jm.join(divide_by_initial_world_size=False):     # the mean over the ranks still training
        for k in range(r + 1):
            jo.zero_grad()
            torch.nn.functional.mse_loss(jm(torch.from_numpy(jx[k, r])), torch.from_numpy(jy[k, r])).backward()
            jo.step()
    res["join"]["params_by_active"] = [p.detach().numpy().tolist() for p in jm.parameters()]
    jm = DDP(mlp())
    try:
        with jm.join(throw_on_early_termination=True):
            for k in range(1 if r == 0 else 2):
                torch.nn.functional.mse_loss(jm(torch.from_numpy(jx[k, r])), torch.from_numpy(jy[k, r])).backward()
        res["join"]["throw"] = ""
    except RuntimeError as e:
        res["join"]["throw"] = str(e)
    throws = [None] * n
    dist.all_gather_object(throws, res["join"]["throw"])
    res["join"]["throw"] = throws
    dist.barrier()

    # static_graph: unused parameters found (and their flags all-reduced) in the first iteration only
    counted: list = []
    sub = events.subscribe("collective", lambda ev: counted.append(ev.name))
    res["static_graph"] = {}
    for name, kw in (("static", {"static_graph": True}), ("search", {"find_unused_parameters": True})):
        m = DDP(Branchy(), **kw)
        per_step = []
        for s in range(STEPS):
            counted.clear()
            torch.nn.functional.mse_loss(m(x0), y0).backward()
            per_step.append(counted.count("all_reduce"))
        res["static_graph"][name] = {"all_reduces": per_step, "unused_grad_none": m.module.unused.weight.grad is None,
                                     "grads": [p.grad.numpy().tolist() for p in m.module.used.parameters()]}
    sub.unsubscribe()

    # gradient_as_bucket_view: .grad views of the reduced bucket (one bucket here), or copies
    views = {}
    for flag in (True, False):
        m = DDP(mlp(), gradient_as_bucket_view=flag)
        torch.nn.functional.mse_loss(m(x0), y0).backward()
        bases = {id(p.grad._base) if p.grad._base is not None else None for p in m.parameters()}
        views[str(flag)] = {"bases": len(bases), "none": None in bases,
                            "grads": [p.grad.numpy().tolist() for p in m.parameters()]}
    res["bucket_view"] = views

    # cuda tensors (the simulated device) over MPI: they travel through host copies
    with simulated_cuda():
        t = torch.full((2,), float(r + 1), device="cuda")
        dist.all_reduce(t)
        on_gpu, on_cpu = DDP(mlp().to("cuda")), DDP(mlp())
        for m, dev in ((on_gpu, "cuda"), (on_cpu, "cpu")):
            torch.nn.functional.mse_loss(m(x0.to(dev)), y0.to(dev)).backward()
        res["cuda"] = {"all_reduce": t.cpu().tolist(), "device": str(next(on_gpu.parameters()).grad.device),
                       "max_diff": max(float((p.grad.cpu() - q.grad).abs().max())
                                       for p, q in zip(on_gpu.parameters(), on_cpu.parameters()))}

    # communication hooks: bytes on the wire per backward, and a short training run
    sent: list = []
    sub = events.subscribe("collective", lambda ev: sent.append((ev.name, ev.nbytes)))
    hooks = {"allreduce": (None, default_hooks.allreduce_hook), "fp16": (None, default_hooks.fp16_compress_hook),
             "bf16": (None, default_hooks.bf16_compress_hook),
             "powerSGD": (powerSGD_hook.PowerSGDState(None, matrix_approximation_rank=2, start_powerSGD_iter=2),
                          powerSGD_hook.powerSGD_hook)}
    res["hooks"] = {}
    rng = np.random.default_rng(5)
    hx = rng.standard_normal((PER_RANK * n, D_IN)).astype(np.float32)
    hy = np.tanh(hx @ rng.standard_normal((D_IN, D_OUT)).astype(np.float32))
    for name, (state, hook) in hooks.items():
        m = DDP(mlp())
        m.register_comm_hook(state, hook)
        o = torch.optim.SGD(m.parameters(), lr=0.3)
        losses, nbytes = [], []
        for step in range(40):
            o.zero_grad()
            loss = torch.nn.functional.mse_loss(m(torch.from_numpy(hx[mine])), torch.from_numpy(hy[mine]))
            sent.clear()
            loss.backward()
            nbytes.append(sum(b for k, b in sent if k != "barrier"))
            o.step()
            losses.append(loss.item())
        res["hooks"][name] = {"first": losses[0], "last": losses[-1], "bytes": nbytes[-1]}
    sub.unsubscribe()

    # the profiler sees the collectives, on their own thread, during backward
    m = DDP(mlp(), bucket_cap_mb=200 / 2**20)
    with torch.profiler.profile() as prof:
        torch.nn.functional.mse_loss(m(torch.from_numpy(xs[0][mine])), torch.from_numpy(ys[0][mine])).backward()
    kinds = [e.kind for e in prof.events()]
    res["profiler"] = {"collectives": kinds.count("collective"), "backward": kinds.count("backward")}

    # ZeRO: Adam sharded across ranks against plain Adam, on the same DDP gradients
    zmodel, pmodel = DDP(mlp()), mlp()
    zero = ZeroRedundancyOptimizer(zmodel.parameters(), torch.optim.Adam, lr=0.05)
    plain = torch.optim.Adam(pmodel.parameters(), lr=0.05)
    for s in range(STEPS):
        zero.zero_grad()
        plain.zero_grad()
        torch.nn.functional.mse_loss(zmodel(torch.from_numpy(xs[s][mine])), torch.from_numpy(ys[s][mine])).backward()
        for p, q in zip(pmodel.parameters(), zmodel.parameters()):
            p.grad = q.grad.clone()
        zero.step()
        plain.step()
    held = sum(v.numel() for st in zero.optim.state.values() for v in st.values() if isinstance(v, torch.Tensor))
    total = sum(v.numel() for st in plain.state.values() for v in st.values() if isinstance(v, torch.Tensor))
    zero.consolidate_state_dict(to=0)
    whole = zero.state_dict() if r == 0 else None
    res["zero"] = {"max_diff": max(float((p - q).abs().max()) for p, q in zip(pmodel.parameters(),
                                                                              zmodel.parameters())),
                   "held": held, "total": total,
                   "state_matches": (None if whole is None else max(
                       float((whole["state"][i]["exp_avg"] - plain.state_dict()["state"][i]["exp_avg"]).abs().max())
                       for i in range(4)))}
    all_held = [None] * n
    dist.all_gather_object(all_held, held)
    res["zero"]["held_per_rank"] = all_held

    # RemoteModule on the last rank, driven by rank 0: forward and backward equal a local copy's
    rpc.init_rpc(f"worker{r}")
    if r == 0:
        remote = RemoteModule(f"worker{n - 1}/cpu", Seeded)
        local = Seeded()
        x = torch.from_numpy(xs[0][:PER_RANK]).requires_grad_()
        x2 = x.detach().clone().requires_grad_()
        y_remote, y_local = remote(x), local(x2)
        (y_remote * y_remote).sum().backward()
        (y_local * y_local).sum().backward()
        far = rpc.rpc_sync(f"worker{n - 1}", grads_of, (remote.module_rref._key,))
        near = [p.grad.numpy() for p in local.parameters()]
        res["remote"] = {"forward": float((y_remote - y_local).abs().max()),
                         "input_grad": float((x.grad - x2.grad).abs().max()),
                         "param_grads": max(float(np.abs(a - b).max()) for a, b in zip(far, near)),
                         "async": float((remote.forward_async(x.detach()).wait() - y_local).abs().max())}
        t = time.perf_counter()
        try:
            rpc.rpc_sync(f"worker{n - 1}", time.sleep, (0.8,), timeout=0.2)
            res["rpc_timeout"] = {"error": ""}
        except RuntimeError as e:
            res["rpc_timeout"] = {"error": str(e)}
        res["rpc_timeout"]["waited"] = time.perf_counter() - t
        try:
            rpc.rpc_async(f"worker{n - 1}", time.sleep, (0.8,), timeout=0.1).wait()
        except RuntimeError as e:
            res["rpc_timeout"]["async_error"] = str(e)
        time.sleep(0.9)      # the late replies come and are dropped; the agent still serves
        res["rpc_timeout"]["after"] = rpc.rpc_sync(f"worker{n - 1}", max, (2, 5), timeout=0)

        # distributed autograd: a remote Linear and a local head, stepped by DistributedOptimizer
        far_lin, near_lin = RemoteModule(f"worker{n - 1}/cpu", Seeded), Seeded()
        head, near_head = torch.nn.Linear(D_OUT, 1), torch.nn.Linear(D_OUT, 1)
        near_head.load_state_dict(head.state_dict())
        dopt = DistributedOptimizer(torch.optim.SGD, far_lin.remote_parameters() + [rpc.RRef(p) for p in
                                                                                    head.parameters()], lr=0.1)
        lopt = torch.optim.SGD([*near_lin.parameters(), *near_head.parameters()], lr=0.1)
        x = torch.from_numpy(xs[1][:PER_RANK])
        for _ in range(2):
            with dist_autograd.context() as cid:
                dist_autograd.backward(cid, [head(far_lin(x)).square().sum()])
                local_grads = dist_autograd.get_gradients(cid)
                dopt.step(cid)
            lopt.zero_grad()
            near_head(near_lin(x)).square().sum().backward()
            lopt.step()
        far_params, far_has_grad = rpc.rpc_sync(f"worker{n - 1}", params_of, (far_lin.module_rref._key,))
        res["dist_autograd"] = {
            "remote": max(float(np.abs(a - b.detach().numpy()).max()) for a, b in zip(far_params, near_lin.parameters())),
            "local": max(float((a - b).abs().max()) for a, b in zip(head.parameters(), near_head.parameters())),
            "local_grads": sorted(tuple(t.shape) for t in local_grads),
            "grad_untouched": head.weight.grad is None and not far_has_grad}
    rpc.shutdown()
    dist.barrier()
    if r == 0:
        np.savez(f"{out}/ddp.npz", *ddp_params, *nosync_grads)
        with open(f"{out}/results.json", "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
