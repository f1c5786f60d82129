"""One GPU check for tapelab's cuda backend: run it whenever a GPU machine is available.

    .venv/bin/python bench/gpu_check.py              # on a GPU machine: < 5 minutes
    .venv/bin/python bench/gpu_check.py --simulate   # on CPU: the same checks on a simulated cuda:0
    .venv/bin/python bench/gpu_check.py -k conv      # only ops / sections whose name contains "conv"

With ``tapelab.cuda.is_available()`` it
1. exercises the ``tapelab.cuda`` API (devices, streams, events, memory statistics);
2. runs the op database (tests/opdb, imported from there, not copied) on cuda against cpu:
   forward values and dtypes, and the gradients of every differentiable input;
3. trains an MLP, a small CNN and a Transformer block for a few SGD steps on cuda against cpu
   (same initial weights and data; losses and final weights compared);
4. captures an MLP training step (forward, backward, SGD step) into a ``tapelab.graphs.Graph``
   on cuda (stream-captured into a ``cupy.cuda.Graph``) and replays it against eager steps;
   then captures the MLP (batch 64) and Transformer block steps of step 6: each must be ONE
   CUDA graph launch (its GEMMs inside, through cuBLASLt), its replays equal to eager tapelab
   and PyTorch CUDA steps, and it is timed against PyTorch CUDA eager (goal: >= 3x);
5. runs the NCCL backend in a job of one MPI rank: ``init_process_group("nccl")``, its
   collectives and a DDP step on cuda against cpu (with ``--simulate``, on the NCCL stand-in of
   tests/programs/ddp_fake_nccl.py);
6. times the MLP and the Transformer block step on cuda against PyTorch CUDA, if installed;
then prints a summary table, and exits 1 on any mismatch or error.

Without a GPU it says why, checks that everything imports, and exits 0. ``--capture`` runs only
the capture checks of step 4 (about a minute on a GPU: the short run that proves issue 18's
"a captured step is a single graph launch").

``--simulate`` runs steps 2-4 on ``tapelab._backend.simulated_cuda()``: numpy-backed arrays that,
like cupy's, refuse implicit conversion to numpy and mixing with numpy arrays. It finds device
bugs (a factory without ``device=``, a forward building a numpy array, a mixed-device op) on
CPU; it cannot find cupy's numerical or API differences. Record real-GPU runs in bench/README.md.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the op database lives in tests/opdb

import tapelab  # noqa: E402
from opdb.ondevice import host, run_case  # noqa: E402
from tapelab import _backend  # noqa: E402
from gpu_models import MODELS, _data, _max_diff, _median_step_ms, _setup, _torch_cuda, make_mlp, sgd_step  # noqa: E402

def check_opdb(dev, pattern: str = "", dtypes=("float32", "float64"), shard=(0, 1)):
    """Every OpInfo sample on ``dev`` against cpu (ops ``k, k+n, ...`` for ``shard=(k, n)``).
    Returns (n_cases, failures[(case, message)])."""
    from opdb import OP_DB
    n, failures = 0, []
    for j, op in enumerate(OP_DB):
        if (pattern and pattern not in op.name) or j % shard[1] != shard[0]:
            continue
        for i, sample in enumerate(op.samples()):
            for dtype in op.dtypes:
                if dtype not in dtypes:
                    continue
                n += 1
                case = f"{op.name}-{sample.name or i}-{dtype}"
                try:
                    run_case(op, sample, dtype, dev)
                except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the run
                    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
                    # numpy's mismatch report: its first line, the largest differences and both arrays
                    msg = " | ".join(lines[:1] + [ln for ln in lines[1:] if ln.startswith(("Max", "x:", "y:"))])
                    failures.append((case, f"{type(e).__name__}: {msg}"[:700]))
                    if shard[1] > 1:    # a shard's result comes at its end: show failures as they happen
                        print(f"  FAIL {case}: {failures[-1][1]}", file=sys.stderr, flush=True)
    return n, failures


def check_opdb_sharded(pattern: str, jobs: int):
    """``check_opdb`` on cuda:0 in ``jobs`` processes of this script at once: a cold cupy compiles
    each new kernel on first use, and the processes compile on as many cores."""
    cmd = [sys.executable, os.path.abspath(__file__), "-k", pattern, "--opdb-shard"]
    procs = [subprocess.Popen(cmd + [f"{k}/{jobs}"], stdout=subprocess.PIPE, text=True) for k in range(jobs)]
    n, failures = 0, []
    for k, p in enumerate(procs):
        out, _ = p.communicate()
        try:
            got = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            failures.append((f"shard {k}/{jobs}", f"exited {p.returncode} without a result"))
            continue
        n += got["n"]
        failures += [tuple(f) for f in got["failures"]]
    return n, failures


def train(m, name, device, steps=5):
    """Losses of ``steps`` SGD-momentum steps and the final weights (as numpy)."""
    built = _setup(m, name, device)
    model, step = built[0], sgd_step(m, built)
    losses = [float(step().item()) for _ in range(steps)]
    weights = {k: np.asarray(v.detach().cpu()) for k, v in model.state_dict().items()}
    return losses, weights


def check_training(dev, pattern="", steps=5):
    rows = []
    for name in MODELS:
        if pattern and pattern.lower() not in name.lower():
            continue
        try:
            c_loss, c_w = train(tapelab, name, "cpu", steps)
            d_loss, d_w = train(tapelab, name, dev, steps)
            np.testing.assert_allclose(d_loss, c_loss, rtol=1e-4, atol=1e-5, err_msg="losses")
            worst = max(_max_diff(d_w[k], c_w[k]) for k in c_w)
            ok = worst <= 1e-4
            rows.append((name, ok, f"losses {c_loss[0]:.4f} -> {c_loss[-1]:.4f}, max |dw| {worst:.1e}"))
        except Exception as e:  # noqa: BLE001
            rows.append((name, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]))
    return rows


# ---------------------------------------------------------------- a captured training step (issue 6)
def check_graph_replay(dev, steps=10, sizes=(64, 128, 128, 10), batch=32):
    """An MLP SGD-momentum step captured once on ``dev`` and replayed ``steps`` times, against the
    same step run eagerly on ``dev``: losses each step and final weights. Returns (ok, detail)."""
    def setup():
        model = make_mlp(tapelab, np.random.default_rng(0), sizes).to(dev)
        opt = tapelab.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sx = tapelab.zeros(batch, sizes[0], device=dev)
        sy = tapelab.zeros(batch, dtype=tapelab.int64, device=dev)

        def step():
            loss = tapelab.nn.functional.cross_entropy(model(sx), sy)
            loss.backward()
            opt.step()
            return loss
        return model, opt, sx, sy, step

    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((batch, sizes[0])).astype(np.float32) for _ in range(steps + 1)]
    ys = [rng.integers(0, sizes[-1], batch).astype(np.int64) for _ in range(steps + 1)]

    def feed(sx, sy, i):
        sx.copy_(tapelab.tensor(xs[i]).to(dev))
        sy.copy_(tapelab.tensor(ys[i]).to(dev))

    e_model, e_opt, e_x, e_y, e_step = setup()
    g_model, g_opt, g_x, g_y, g_step = setup()
    for opt, sx, sy, step in ((e_opt, e_x, e_y, e_step), (g_opt, g_x, g_y, g_step)):
        feed(sx, sy, 0)                               # warm-up: momentum buffers exist
        opt.zero_grad(set_to_none=True)
        step()
    g = tapelab.graphs.Graph(dev)
    g_opt.zero_grad(set_to_none=True)
    with tapelab.graphs.graph(g):
        static_loss = g_step()
    e_losses, g_losses = [], []
    for i in range(1, steps + 1):
        feed(e_x, e_y, i)
        e_opt.zero_grad(set_to_none=True)
        e_losses.append(float(e_step().item()))
        feed(g_x, g_y, i)
        g.replay()
        g_losses.append(float(static_loss.item()))
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-4, atol=1e-5, err_msg="losses")
    e_w = {k: host(v) for k, v in e_model.state_dict().items()}
    g_w = {k: host(v) for k, v in g_model.state_dict().items()}
    worst = max(_max_diff(g_w[k], e_w[k]) for k in e_w)
    kinds = {}
    for b in g.buffers():
        kinds[b["kind"]] = kinds.get(b["kind"], 0) + 1
    detail = (f"{steps} replays ({_launches(g)}, {g.last_replay_us:.0f} us host time last), {len(g.nodes())} "
              f"steps, buffers {kinds}, losses {e_losses[0]:.4f} -> {e_losses[-1]:.4f}, max |dw| {worst:.1e}")
    if dev.type == "cuda" and not g.stream_captured:
        return False, "no stream capture on cuda: " + detail
    if g.cuda_graphs != 1 or g.eager_steps:
        return False, "not one CUDA graph: " + detail
    return worst <= 1e-4, detail


def _launches(g) -> str:
    """What one replay of ``g`` launches, and where its GEMMs ran."""
    if not g.stream_captured:
        return "program replayed, no CUDA graph"
    s = g.summary()
    route = (f"GEMMs through {s['gemm_route']} ({g._exec.route.calls} in the capture)" if s["gemm_route"]
             else f"no capture-legal GEMM route: {s['gemm_fallback']}")
    return f"{g.cuda_graphs} CUDA graph launch(es), {g.eager_steps} steps between graphs, {route}"


# ---------------------------------------------------------------- one graph per training step (issue 18)
CAPTURED = ("MLP 784-512-512-10, batch 64", "Transformer block d128, batch 8x64")


def check_captured_steps(dev, pattern="", replays=5, time_it=True):
    """Each ``CAPTURED`` step (SGD momentum) captured once on ``dev``: it must replay as ONE CUDA
    graph launch (every GEMM inside it), its ``replays`` losses and final weights must equal the
    same steps run eagerly by tapelab on ``dev`` and by PyTorch CUDA (if installed), and with
    ``time_it`` its replay is timed against PyTorch CUDA's eager step (median of 20, ms).
    Returns rows (name, ok, detail, replay_ms, torch_ms)."""
    torch = _torch_cuda()
    rows = []
    for name in CAPTURED:
        if pattern and pattern.lower() not in name.lower():
            continue
        try:
            rows.append(_check_captured(name, dev, torch, replays, time_it))
        except Exception as e:  # noqa: BLE001
            rows.append((name, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300],
                         None, None))
    return rows


def _check_captured(name, dev, torch, replays, time_it):
    _, shape, classes = MODELS[name]
    sides = {"eager": (tapelab, dev), "graph": (tapelab, dev)}
    if torch is not None:
        sides["torch"] = (torch, "cuda")
    built = {k: _setup(m, name, d) for k, (m, d) in sides.items()}

    def run(k):
        m = sides[k][0]
        model, x, y, opt = built[k]
        loss = m.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    for k in built:                                    # warm-up: momentum buffers exist
        built[k][3].zero_grad(set_to_none=True)
        run(k)
    g = tapelab.graphs.Graph(dev)
    built["graph"][3].zero_grad(set_to_none=True)
    with tapelab.graphs.graph(g):
        static_loss = run("graph")
    losses = {k: [] for k in built}
    for i in range(1, replays + 1):
        x_np, y_np = _data(shape, classes, seed=i)
        for k, (m, d) in sides.items():
            model, x, y, opt = built[k]
            with m.no_grad():
                x.copy_(m.tensor(x_np).to(d))
                y.copy_(m.tensor(y_np).to(d))
            if k == "graph":
                g.replay()
                losses[k].append(float(static_loss.item()))
            else:
                opt.zero_grad(set_to_none=True)
                losses[k].append(float(run(k).item()))
    weights = {k: {n: np.asarray(v.detach().cpu()) for n, v in built[k][0].state_dict().items()} for k in built}
    worst = {k: max(_max_diff(weights["graph"][n], weights[k][n]) for n in weights[k]) for k in built if k != "graph"}
    for k in worst:
        np.testing.assert_allclose(losses["graph"], losses[k], rtol=1e-4, atol=1e-5, err_msg=f"losses vs {k}")
    segments = g._exec.segments if g.stream_captured else []
    one = len(segments) == 1 and hasattr(segments[0], "launch") and g.eager_steps == 0
    ok = one and max(worst.values()) <= 1e-4 and (g.stream_captured or dev.type != "cuda")
    replay_ms = torch_ms = None
    if time_it:
        replay_ms = _median_step_ms(g.replay, tapelab.cuda.synchronize)
        if torch is not None:
            def torch_step():
                built["torch"][3].zero_grad()
                run("torch")
            torch_ms = _median_step_ms(torch_step, torch.cuda.synchronize)
    vs = ", ".join(f"max |dw| vs {k} {w:.1e}" for k, w in worst.items())
    detail = (f"{_launches(g)}; {replays} replays, losses {losses['graph'][0]:.4f} -> {losses['graph'][-1]:.4f} "
              f"equal to {' and '.join(k for k in worst)}; {vs}")
    return name, ok, detail, replay_ms, torch_ms


# ---------------------------------------------------------------- timing against PyTorch CUDA
def time_against_torch(dev, pattern=""):
    rows = []
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    for name in ("MLP 784-512-512-10, batch 64", "Transformer block d128, batch 8x64"):
        if pattern and pattern.lower() not in name.lower():
            continue
        ours = _median_step_ms(sgd_step(tapelab, _setup(tapelab, name, dev)), tapelab.cuda.synchronize)
        theirs = (_median_step_ms(sgd_step(torch, _setup(torch, name, "cuda")), torch.cuda.synchronize)
                  if have_torch else None)
        rows.append((name, ours, theirs))
        replay = _median_step_ms(_captured_step(name, dev), tapelab.cuda.synchronize)
        rows.append(("  the same, captured: Graph.replay()", replay, theirs))
    return rows


def _captured_step(name, dev):
    """The timed step captured once into a ``tapelab.graphs.Graph`` on ``dev``: returns its replay."""
    model, x, y, opt = _setup(tapelab, name, dev)

    def step():
        tapelab.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    step()                                           # warm-up: optimizer state exists before capture
    opt.zero_grad(set_to_none=True)
    g = tapelab.graphs.Graph(dev)
    with tapelab.graphs.graph(g):
        step()
    return g.replay


# ---------------------------------------------------------------- the tapelab.cuda API
def check_cuda_api():
    c = tapelab.cuda
    rows = []

    def probe(what, fn):
        try:
            rows.append((what, True, str(fn())))
        except Exception as e:  # noqa: BLE001
            rows.append((what, False, f"{type(e).__name__}: {e}"[:300]))

    probe("device_count / current_device / name",
          lambda: f"{c.device_count()} / {c.current_device()} / {c.get_device_name()}")

    def properties():
        p, (free, total) = c.get_device_properties(0), c.mem_get_info()
        assert p.total_memory == total and 0 < free <= total and c.get_device_capability() == (p.major, p.minor)
        return f"sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, {total >> 30} GiB ({free >> 30} GiB free)"
    probe("get_device_properties / mem_get_info", properties)

    def pinned():
        x = tapelab.arange(1 << 20, dtype=tapelab.float32).pin_memory()
        y = x.cuda(non_blocking=True)
        c.synchronize()
        assert x.is_pinned() and y.get_device() == 0 and x.get_device() == -1 and y.data_ptr() != 0
        assert float(y[-1].item()) == float((1 << 20) - 1)
        return "pin_memory -> cuda(non_blocking=True)"
    probe("pinned host memory", pinned)

    def memory():
        c.synchronize()
        c.empty_cache()
        c.reset_peak_memory_stats()
        before = c.memory_allocated()
        t = tapelab.zeros(1 << 20, device="cuda")       # 4 MiB
        during = c.memory_allocated()
        del t
        peak = c.max_memory_allocated()
        assert during - before >= 4 << 20, f"allocated grew by {during - before} bytes for 4 MiB"
        assert peak >= during, f"peak {peak} < allocated {during}"
        assert c.memory_reserved() >= c.memory_allocated()
        return f"+{(during - before) >> 20} MiB, peak {peak >> 20} MiB"
    probe("memory statistics", memory)

    def streams():
        s = c.Stream()
        start, end = c.Event(enable_timing=True), c.Event(enable_timing=True)
        with s:
            start.record()
            a = tapelab.randn(512, 512, device="cuda")
            b = a @ a
            end.record()
        c.current_stream().wait_stream(s)
        end.synchronize()
        ms = start.elapsed_time(end)
        assert ms >= 0 and b.device == tapelab.device("cuda")
        return f"matmul on a side stream: {ms:.3f} ms"
    probe("Stream / Event.elapsed_time", streams)

    def dlpack():
        import cupy
        t = tapelab.arange(6.0, device="cuda")
        a = cupy.from_dlpack(t)
        a[0] = 42.0
        back = tapelab.from_dlpack(a)
        assert float(t[0].item()) == 42.0 and back.device == t.device
        return "cupy <-> tapelab share memory"
    probe("DLPack with cupy", dlpack)

    def dlpack_torch():
        try:
            import torch
        except ImportError:
            return "skipped: torch is not installed"
        t = tapelab.arange(4.0, device="cuda")
        tt = torch.from_dlpack(t)
        tt[1] = 7.0
        back = tapelab.from_dlpack(torch.arange(3.0, device="cuda"))
        assert tt.device.type == "cuda" and float(t[1].item()) == 7.0
        assert back.device == t.device and back.tolist() == [0.0, 1.0, 2.0]
        return "torch.cuda <-> tapelab share memory"
    probe("DLPack with PyTorch CUDA", dlpack_torch)

    def dlpack_jax():
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # JAX would take 75% of the GPU
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            return "skipped: jax is not installed"
        t = tapelab.arange(4.0, device="cuda")
        j = jnp.from_dlpack(t)
        assert j.unsafe_buffer_pointer() == t._data.data.ptr, "JAX copied the tensor"
        gpu = [d for d in jax.devices() if d.platform == "gpu"]
        back = tapelab.from_dlpack(jax.device_put(jnp.arange(3.0), gpu[0]) if gpu else jnp.arange(3.0))
        assert back.tolist() == [0.0, 1.0, 2.0]
        return f"jax -> tapelab on {back.device}, tapelab -> jax zero-copy"
    probe("DLPack with JAX", dlpack_jax)
    return rows


# ---------------------------------------------------------------- profiler device time
def check_profiler_device_time(dev, n: int = 5) -> tuple[bool, str]:
    """``profile(activities=[CPU, CUDA])`` around ``n`` matmuls: each gets device time from CUDA
    events, and the device times (measured between events after the profile started, read after
    its end) sum to no more than the wall time around it."""
    from tapelab.profiler import ProfilerActivity, profile
    try:
        a = tapelab.randn(1024, 1024, device=dev)
        a @ a                                   # warm up cuBLAS and the memory pool outside the profile
        tapelab.cuda.synchronize()
        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                a @ a
        wall_us = (time.perf_counter() - t) * 1e6
        rows = {r.key: r for r in prof.key_averages()}
        mm = rows["matmul"]
        device_us = sum(r.self_device_time_total for r in rows.values())
        assert mm.count == n and mm.self_device_time_total > 0, \
            f"matmul: {mm.count} calls, {mm.self_device_time_total} us on device"
        assert device_us <= wall_us, f"device time {device_us:.0f} us > wall time {wall_us:.0f} us"
        assert "Self CUDA" in prof.key_averages().table(), "the table has no CUDA columns"
        return True, (f"matmul {mm.self_device_time_total / n:.1f} us on device; all {device_us:.0f} us "
                      f"<= wall {wall_us:.0f} us")
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


# ---------------------------------------------------------------- NCCL (one rank)
def nccl_rank(simulate: bool) -> str:
    """Inside one MPI rank: ``init_process_group("nccl")``, the collectives the backend runs on
    NCCL, and a DDP step on cuda against the same step on cpu. Raises on a mismatch. With
    ``simulate``, tests/programs/ddp_fake_nccl.py stands in for cupy's NCCL."""
    import copy

    from tapelab.nn.parallel import DistributedDataParallel
    dist = tapelab.distributed
    ctx = contextlib.nullcontext()
    if simulate:
        sys.path.insert(0, os.path.join(ROOT, "tests", "programs"))
        import ddp_fake_nccl
        ctx = ddp_fake_nccl.installed()
    with ctx:
        dist.init_process_group("nccl")
    x = tapelab.arange(6, dtype=tapelab.float32, device="cuda")
    dist.all_reduce(x)
    dist.broadcast(x, src=0)
    outs = [tapelab.zeros(6, device="cuda")]
    dist.all_gather(outs, x)
    chunk = tapelab.zeros(6, device="cuda")
    dist.reduce_scatter_tensor(chunk, x)
    for what, t in (("all_reduce", x), ("all_gather", outs[0]), ("reduce_scatter", chunk)):
        assert t.cpu().tolist() == [float(i) for i in range(6)], f"{what}: {t.cpu().tolist()}"
    rng = np.random.default_rng(0)
    ref = tapelab.nn.Sequential(tapelab.nn.Linear(8, 16), tapelab.nn.Tanh(), tapelab.nn.Linear(16, 2))
    model = DistributedDataParallel(copy.deepcopy(ref).to("cuda"))
    data = tapelab.from_numpy(rng.standard_normal((4, 8)).astype(np.float32))
    model(data.to("cuda")).square().sum().backward()
    ref(data).square().sum().backward()
    diff = max(float((p.grad.cpu() - q.grad).abs().max()) for p, q in zip(model.parameters(), ref.parameters()))
    assert diff < 1e-4, f"DDP gradients on cuda differ from cpu by {diff}"
    dist.barrier()
    dist.destroy_process_group()
    return f"all_reduce, broadcast, all_gather, reduce_scatter, DDP step (grads within {diff:.1e} of cpu)"


def check_nccl(simulate: bool, timeout: int = 180) -> tuple[bool, str]:
    """``nccl_rank`` in a job of one rank under mpiexec (a hang ends at the timeout)."""
    try:
        from tapelab.distributed.run import mpiexec
        cmd = [mpiexec(), "-n", "1", sys.executable, "-m", "mpi4py", os.path.abspath(__file__), "--nccl-rank"]
    except Exception as e:  # noqa: BLE001
        return False, f"no MPI ('mpi' extra): {type(e).__name__}: {e}"[:300]
    # a GPU machine runs commands as root, which Open MPI's mpiexec refuses unless told
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(timeout), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        done = subprocess.run(cmd + (["--simulate"] if simulate else []), capture_output=True, text=True,
                              timeout=timeout + 30, env=env)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout} s"
    if done.returncode != 0:          # the last lines that say something (MPI's banners end in dashes)
        said = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip().strip("-")]
        return False, " | ".join(said[-4:] or [f"exit code {done.returncode}"])[:600]
    return True, done.stdout.strip().splitlines()[-1]


# ---------------------------------------------------------------- main
def imports_only() -> list[str]:
    """Without a GPU: check that everything this script needs imports."""
    import opdb  # noqa: F401
    from opdb import OP_DB
    _ = (tapelab.cuda.Stream, tapelab.cuda.Event, tapelab.cuda.memory_allocated, _backend.transfer,
         tapelab.graphs.Graph, tapelab.cuda.CUDAGraph)
    return [f"op database: {len(OP_DB)} ops", f"models: {', '.join(MODELS)}"]


def report_captured(dev, pattern="", time_it=True) -> bool:
    """Print ``check_captured_steps``'s rows; True when every captured step passed."""
    t = time.perf_counter()
    rows = check_captured_steps(dev, pattern, time_it=time_it)
    print(f"\n== captured training steps on {dev}: one CUDA graph each, replays against eager "
          f"({time.perf_counter() - t:.1f} s)")
    for name, good, detail, *_ in rows:
        print(f"  {'ok  ' if good else 'FAIL'} {name:40s} {detail}")
    if time_it:
        print(f"  {'replay time, median of 20 (ms)':40s} {'replay':>10s} {'torch eager':>12s} {'torch/replay':>13s}"
              f"  (goal >= 3)")
        for name, _, _, ours, theirs in rows:
            if ours is None:
                continue
            th = f"{theirs:12.3f}" if theirs else f"{'n/a':>12s}"
            ratio = f"{theirs / ours:13.2f}" if theirs else f"{'n/a':>13s}"
            print(f"  {name:40s} {ours:10.3f} {th} {ratio}")
    return all(r[1] for r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulate", action="store_true", help="check on a simulated cuda:0 (numpy-backed)")
    ap.add_argument("-k", default="", help="only ops / models whose name contains this")
    ap.add_argument("--steps", type=int, default=5, help="training steps per model")
    ap.add_argument("--capture", action="store_true",
                    help="only the capture checks: each captured step one CUDA graph, equal to eager, timed")
    ap.add_argument("--compile", action="store_true",
                    help="only the tapelab.compile checks: fused kernels equal to eager, captured, timed")
    ap.add_argument("--failures", type=int, default=40, help="failures to list")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="processes for the op database on a real GPU")
    ap.add_argument("--opdb-shard", help=argparse.SUPPRESS)   # K/N: one process of --jobs
    ap.add_argument("--nccl-rank", action="store_true", help=argparse.SUPPRESS)   # inside check_nccl's job
    args = ap.parse_args(argv)
    if args.nccl_rank:
        with _backend.simulated_cuda(0) if args.simulate else contextlib.nullcontext():
            print(nccl_rank(args.simulate))
        return 0
    if args.opdb_shard:
        k, jobs = map(int, args.opdb_shard.split("/"))
        n, failures = check_opdb(tapelab.device("cuda:0"), args.k, shard=(k, jobs))
        print(json.dumps({"n": n, "failures": failures}))
        return 0

    t0 = time.perf_counter()
    if args.simulate:
        ctx = _backend.simulated_cuda(0)
        label = "simulated cuda:0 (numpy arrays with cupy's conversion rules)"
    elif tapelab.cuda.is_available():
        ctx = contextlib.nullcontext(tapelab.device("cuda:0"))
        label = f"cuda:0 ({tapelab.cuda.get_device_name(0)})"
    else:
        print(f"gpu_check: no GPU, nothing to check: {tapelab.cuda.unavailable_reason()}")
        for line in imports_only():
            print(f"  imports OK: {line}")
        print("  (bench/gpu_check.py --simulate runs the device checks on a simulated cuda device)")
        return 0

    print(f"gpu_check on {label}; tapelab {getattr(tapelab, '__version__', '?')}, numpy {np.__version__}")
    if args.capture:
        with ctx as dev:
            ok = report_captured(dev, args.k, time_it=not args.simulate)
        print(f"\n== summary: {'PASS' if ok else 'FAIL'} in {time.perf_counter() - t0:.0f} s")
        return 0 if ok else 1
    if args.compile:
        from gpu_compile import report_compiled
        with ctx as dev:
            ok = report_compiled(dev, args.k, time_it=not args.simulate)
        print(f"\n== summary: {'PASS' if ok else 'FAIL'} in {time.perf_counter() - t0:.0f} s")
        return 0 if ok else 1
    ok = True
    with ctx as dev:
        if not args.simulate:
            api = check_cuda_api()
            print("\n== tapelab.cuda API")
            for what, good, detail in api:
                print(f"  {'ok  ' if good else 'FAIL'} {what:40s} {detail}")
                ok &= good
            good, detail = check_profiler_device_time(dev)
            print("\n== profiler device time (CUDA events)")
            print(f"  {'ok  ' if good else 'FAIL'} {'profile 5 matmuls, CPU + CUDA':40s} {detail}")
            ok &= good
        t = time.perf_counter()
        n, failures = check_opdb(dev, args.k) if args.simulate or args.jobs <= 1 \
            else check_opdb_sharded(args.k, args.jobs)
        print(f"\n== op database on {dev} against cpu: {n - len(failures)}/{n} cases match "
              f"({time.perf_counter() - t:.1f} s)")
        for case, msg in failures[:args.failures]:
            print(f"  FAIL {case}: {msg}")
        if len(failures) > args.failures:
            print(f"  ... and {len(failures) - args.failures} more")
        ok &= not failures
        t = time.perf_counter()
        training = check_training(dev, args.k, args.steps)
        print(f"\n== training {args.steps} SGD steps on {dev} against cpu ({time.perf_counter() - t:.1f} s)")
        for name, good, detail in training:
            print(f"  {'ok  ' if good else 'FAIL'} {name:40s} {detail}")
            ok &= good
        if not args.k or args.k.lower() in "graph replay captured mlp step":
            t = time.perf_counter()
            try:
                good, detail = check_graph_replay(dev)
            except Exception as e:  # noqa: BLE001
                good, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            print(f"\n== captured MLP training step on {dev}, replayed against eager "
                  f"({time.perf_counter() - t:.1f} s)")
            print(f"  {'ok  ' if good else 'FAIL'} {'graph replay, SGD momentum':40s} {detail}")
            ok &= good
            ok &= report_captured(dev, args.k, time_it=not args.simulate)
        if not args.k or args.k.lower() in "compiled":
            from gpu_compile import report_compiled
            ok &= report_compiled(dev, "", time_it=not args.simulate)
        if not args.k or args.k.lower() in "nccl":
            t = time.perf_counter()
            good, detail = check_nccl(args.simulate)
            print(f"\n== NCCL backend, one rank{' (cupy NCCL stand-in)' if args.simulate else ''} "
                  f"({time.perf_counter() - t:.1f} s)")
            print(f"  {'ok  ' if good else 'FAIL'} {'init_process_group(nccl), collectives, DDP':40s} {detail}")
            ok &= good
        if not args.simulate:
            print("\n== step time on cuda (median of 20, ms)")
            print(f"  {'workload':40s} {'tapelab':>10s} {'torch':>10s} {'torch/tapelab':>14s}")
            try:
                for name, ours, theirs in time_against_torch(dev, args.k):
                    ratio = f"{theirs / ours:14.2f}" if theirs else f"{'n/a':>14s}"
                    th = f"{theirs:10.3f}" if theirs else f"{'n/a':>10s}"
                    print(f"  {name:40s} {ours:10.3f} {th} {ratio}")
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                ok = False
    print(f"\n== summary: {'PASS' if ok else 'FAIL'} in {time.perf_counter() - t0:.0f} s "
          f"(op cases failing: {len(failures)}, models failing: {sum(not g for _, g, _ in training)})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
