"""DDP scaling: one data-parallel MLP step with 1, 2 and 4 ranks under MPI, and how much of the
gradient all-reduce is hidden behind backward.

    .venv/bin/python bench/ddp_scaling.py            # 1, 2, 4 ranks
    .venv/bin/python bench/ddp_scaling.py --ranks 2 --steps 20

Each rank trains the same MLP on its own batch (weak scaling: the global batch grows with the
ranks). Per step it times forward+backward+SGD with DDP, and the same backward inside
``no_sync()`` (no communication). The all-reduce time comes from the ``collective`` events of
the group's communication thread. ``exposed`` = DDP backward minus local backward: the part of
the communication backward waited for; ``hidden`` = 1 - exposed / all-reduce time. Medians over
the steps, rank 0's numbers. Not a test: nothing asserts a timing. With more ranks than cores,
ranks share cores and every number grows; the header prints the CPU count and load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

BATCH, WIDTH, DEPTH = 64, 512, 4


def rank_job(steps: int) -> None:
    import numpy as np

    import tapelab as torch
    from tapelab import events
    from tapelab.nn.parallel import DistributedDataParallel as DDP
    dist = torch.distributed
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    layers = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 10)), bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(rank)
    x = torch.from_numpy(rng.standard_normal((BATCH, WIDTH)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, BATCH))
    comm: list = []
    events.subscribe("collective", lambda ev: comm.append(ev.duration_ns))
    rows = {"step": [], "backward": [], "local_backward": [], "allreduce": []}
    for i in range(steps + 3):
        opt.zero_grad()
        t0 = time.perf_counter_ns()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        comm.clear()
        t1 = time.perf_counter_ns()
        loss.backward()
        t2 = time.perf_counter_ns()
        opt.step()
        t3 = time.perf_counter_ns()
        reduce_ns = sum(comm)
        opt.zero_grad()
        with model.no_sync():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            t4 = time.perf_counter_ns()
            loss.backward()
            t5 = time.perf_counter_ns()
        if i >= 3:   # warm-up steps out
            rows["step"].append(t3 - t0)
            rows["backward"].append(t2 - t1)
            rows["local_backward"].append(t5 - t4)
            rows["allreduce"].append(reduce_ns)
    med = {k: float(np.median(v)) / 1e6 for k, v in rows.items()}
    if rank == 0:
        print("RESULT " + json.dumps({"ranks": dist.get_world_size(), "buckets": len(model._buckets_of), **med}),
              flush=True)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, nargs="*", default=[1, 2, 4])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rank-job", action="store_true", help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.rank_job:
        rank_job(ns.steps)
        return
    from tapelab.distributed.run import mpiexec
    print(f"DDP MLP step: batch {BATCH}/rank, {DEPTH}x Linear({WIDTH},{WIDTH})+ReLU, Linear({WIDTH},10); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, OMP/OPENBLAS threads 1")
    print(f"{'ranks':>5} {'buckets':>7} {'step ms':>8} {'backward':>9} {'local bwd':>9} {'allreduce':>9} "
          f"{'exposed':>8} {'hidden':>7}")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MPIEXEC_TIMEOUT="600")
    for n in ns.ranks:
        done = subprocess.run([mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", __file__, "--rank-job",
                               "--steps", str(ns.steps)], capture_output=True, text=True, env=env)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{n:>5} failed: {done.stderr[-2000:]}")
            continue
        r = json.loads(line[7:])
        exposed = max(r["backward"] - r["local_backward"], 0.0)
        hidden = f"{1 - exposed / r['allreduce']:.0%}" if n > 1 and r["allreduce"] > 0 else "-"
        print(f"{n:>5} {r['buckets']:>7} {r['step']:>8.1f} {r['backward']:>9.1f} {r['local_backward']:>9.1f} "
              f"{r['allreduce']:>9.1f} {exposed:>8.1f} {hidden:>7}")


if __name__ == "__main__":
    main()
