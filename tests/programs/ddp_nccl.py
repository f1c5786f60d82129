"""The nccl backend's collectives and DDP on CPU (run under mpiexec by tests/test_distributed.py).

``init_process_group("nccl")`` builds the real backend (engine/_c10d/nccl.py) on the stand-ins of
``ddp_fake_nccl.py``; tensors live on the simulated cuda device. Rank 0 writes ``nccl.json``
and ``nccl.npz`` (DDP's parameters after the steps of ddp_checks) into the folder in argv[1].
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_fake_nccl  # noqa: E402
from ddp_checks import PER_RANK, STEPS, data, mlp  # noqa: E402

import tapelab as torch  # noqa: E402
from tapelab._backend import simulated_cuda  # noqa: E402
from tapelab.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

dist = torch.distributed


def collectives(r: int, n: int) -> dict:
    cuda = torch.device("cuda")
    res: dict = {}
    t = torch.full((3,), float(r + 1), device=cuda)
    dist.all_reduce(t)
    res["all_reduce"] = t.cpu().tolist()
    t = torch.full((2,), float(r + 1), device=cuda)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    res["max"] = t.cpu().tolist()
    t = torch.full((2,), float(r + 1), device=cuda)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    res["avg"] = t.cpu().tolist()
    h = torch.full((2,), float(r + 1), device=cuda, dtype=torch.float16)
    dist.all_reduce(h, async_op=True).wait()
    res["half"] = [h.cpu().tolist(), str(h.dtype)]
    t = torch.full((2,), float(r + 1), device=cuda)
    dist.reduce(t, dst=n - 1)
    res["reduce"] = t.cpu().tolist()
    t = torch.arange(4, device=cuda) + 10 * r
    dist.broadcast(t, src=n - 1)
    res["broadcast"] = t.cpu().tolist()
    outs = [torch.zeros(2, device=cuda) for _ in range(n)]
    dist.all_gather(outs, torch.full((2,), float(r), device=cuda))
    res["all_gather"] = [o.cpu().tolist() for o in outs]
    whole = torch.zeros(2 * n, device=cuda)
    dist.all_gather_into_tensor(whole, torch.full((2,), float(r), device=cuda))
    res["all_gather_into_tensor"] = whole.cpu().tolist()
    out = torch.zeros(2, device=cuda)
    dist.reduce_scatter(out, [torch.full((2,), float(10 * i + r), device=cuda) for i in range(n)])
    res["reduce_scatter"] = out.cpu().tolist()
    out = torch.zeros(2, device=cuda)
    dist.reduce_scatter_tensor(out, torch.arange(2 * n, dtype=torch.float32, device=cuda))
    res["reduce_scatter_tensor"] = out.cpu().tolist()
    # through the host over MPI (NCCL has no such collective here)
    got = [torch.zeros(1, device=cuda) for _ in range(n)] if r == 0 else None
    dist.gather(torch.full((1,), float(r), device=cuda), got, dst=0)
    res["gather"] = [g.cpu().tolist() for g in got] if got else None
    one = torch.zeros(1, device=cuda)
    dist.scatter(one, [torch.full((1,), float(i + 100), device=cuda) for i in range(n)] if r == 0 else None, src=0)
    res["scatter"] = one.cpu().tolist()
    outs = [torch.zeros(1, device=cuda) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((1,), float(10 * r + j), device=cuda) for j in range(n)])
    res["all_to_all"] = [o.cpu().tolist() for o in outs]
    if n > 1:
        if r == 0:
            dist.send(torch.full((2,), 7.0, device=cuda), dst=1)
        elif r == 1:
            box = torch.zeros(2, device=cuda)
            dist.recv(box, src=0)
            res["recv"] = [box.cpu().tolist(), str(box.device)]
    seen = [None] * n
    dist.all_gather_object(seen, res.get("recv"))     # rank 1's receipt, for rank 0 to write
    res["recv"] = seen[1 % n]
    dist.barrier()
    return res


def main(out: str) -> None:
    r = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    os.environ.setdefault("LOCAL_RANK", str(r))       # the backend's GPU: cuda:<LOCAL_RANK>
    with simulated_cuda():
        with ddp_fake_nccl.installed():
            dist.init_process_group("nccl")
        r, n = dist.get_rank(), dist.get_world_size()
        res = {"world": n, "backend": dist.get_backend(), "collectives": collectives(r, n)}
        nc = ddp_fake_nccl.communicator()
        calls = len(nc.calls)

        model = DDP(mlp().to("cuda"), bucket_cap_mb=200 / 2**20)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        xs, ys = data(n)
        mine = slice(r * PER_RANK, (r + 1) * PER_RANK)
        for s in range(STEPS):
            opt.zero_grad()
            x, y = torch.from_numpy(xs[s][mine]).to("cuda"), torch.from_numpy(ys[s][mine]).to("cuda")
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        ddp_calls = nc.calls[calls:]
        res["ddp"] = {"buckets": len(model._buckets_of), "grad_device": str(next(model.parameters()).grad.device),
                      "all_reduces": sum(c[0] == "allReduce" for c in ddp_calls),
                      "floats_reduced": sum(c[1] for c in ddp_calls if c[0] == "allReduce"),
                      "broadcasts": sum(c[0] == "bcast" for c in ddp_calls), "device": nc.dev}
        params = [p.detach().cpu().numpy() for p in model.module.parameters()]
        devices = [None] * n
        dist.all_gather_object(devices, nc.dev)
        res["devices"] = devices
        dist.destroy_process_group()
    if r == 0:
        np.savez(f"{out}/nccl.npz", *params)
        with open(f"{out}/nccl.json", "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main(sys.argv[1])
