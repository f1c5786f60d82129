#!/usr/bin/env python
"""Time the same workloads in tapelab and PyTorch and print one table.

    python bench/run.py                  # all workloads
    python bench/run.py --threads 2      # each library in its own process (the default above 1 thread)
    python bench/run.py --in-process     # both libraries in this process (the default at 1 thread)
    python bench/run.py --quick          # fewer repetitions, skips quick=False workloads
    python bench/run.py --glibc-default  # run with TAPELAB_KEEP_FREED_MEMORY=0 (freed memory goes back to the OS)
    python bench/run.py -k chain         # only workloads whose name contains "chain"
    python bench/run.py --profile chain16   # cProfile the tapelab side of the first match
    python bench/run.py --matrix         # re-run itself under each allocator / OpenBLAS setting

Each number is the median over repetitions (after warm-up) of the time per call; a repetition
times a loop long enough to be well above the timer's resolution. tapelab and torch repetitions
alternate, so load from other processes hits both sides alike. Where a workload has one, the
"numpy floor" column times the same step written by hand in numpy (bench/programs/floors.py):
the engine's time minus the floor is its overhead. Not a test: nothing asserts.

With more than one thread, numpy's OpenBLAS threads and torch's OpenMP threads in one process
spin against each other for the same cores, and torch loses more. So there, each library runs in
a child process of its own (tapelab and the numpy floor in one, torch in the other; neither
imports the other library), both started once and driven over pipes with one JSON line per
command; rounds still alternate, and the idle child sleeps in a blocking read.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIDES = ("tapelab", "torch")
# After its last call OpenBLAS's idle threads spin (yielding) for 2^28 TSC ticks, ~0.13 s at 2 GHz,
# before they sleep; libgomp's for a few ms. Measured: without a pause, tapelab's process used 22% of a
# CPU on average in one run (62% on the LSTM row), 3-10% in others, while torch's round ran.
SETTLE_S = 0.15

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter repetitions")
    p.add_argument("--glibc-default", action="store_true",
                   help="import tapelab with TAPELAB_KEEP_FREED_MEMORY=0: glibc's default thresholds, freed "
                        "large blocks go back to the OS (tapelab's default keeps them; see engine/_memory.py). "
                        "The policy is process-wide, so both sides run under the same one")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for numpy's BLAS and torch (default: the CPUs this process may use)")
    p.add_argument("-k", dest="filter", default="", help="only workloads whose name contains this")
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="wall: perf_counter; thread: CPU time of the calling thread (time.thread_time), "
                        "which ignores time spent descheduled on a busy machine; needs --threads 1 so BLAS "
                        "and torch work runs on the calling thread")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per side (default 15, quick 5)")
    p.add_argument("--mlp-api", choices=("auto", "plain", "nn"), default="auto",
                   help="MLP written with plain tensor ops or nn/optim (auto: nn once tapelab has it)")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="instead of the table, cProfile the tapelab side of the first workload matching NAME")
    p.add_argument("--profile-calls", type=int, default=20000)
    p.add_argument("--processes", dest="processes", action="store_true", default=None,
                   help="each library in its own child process, rounds alternating over pipes "
                        "(default when the thread count is above 1)")
    p.add_argument("--in-process", dest="processes", action="store_false",
                   help="both libraries in this process (default at 1 thread)")
    p.add_argument("--settle", type=float, default=None, metavar="SECONDS",
                   help="after each side's set-up and each of its rounds, sleep this long before the other "
                        "side starts, so the threads of the pool that just worked are asleep by then (default "
                        f"above 1 thread: {SETTLE_S} s, for OpenBLAS's spin of 2^28 clock ticks; 0 at 1 thread)")
    p.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--matrix", action="store_true",
                   help="run this script once per allocator setting (default, --glibc-default) and, where "
                        "OPENBLAS_CORETYPE is set, also with it and OPENBLAS_L2_SIZE unset")
    return p.parse_args(argv)


def allocator_description() -> str:
    import tapelab
    parts = [tapelab._memory.policy()]
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES", "LD_PRELOAD"):
        if os.environ.get(var):
            parts.append(f"{var}={os.environ[var]}")
    return "; ".join(parts)


def openblas_info() -> str:
    """numpy's OpenBLAS build as it runs now: core kernel and thread count."""
    import glob

    import numpy as np
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "lib*openblas*.so*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                core = getattr(lib, f"{prefix}get_corename{suffix}", None)
                nthr = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if core is not None:
                    core.restype = ctypes.c_char_p
                    return f"OpenBLAS core {core().decode()}, {nthr() if nthr else '?'} threads"
    return "OpenBLAS core unknown (numpy not linked against a bundled OpenBLAS)"


def fmt_time(s: float) -> str:
    if s != s:   # nan
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def run_matrix(args) -> int:
    base = [sys.executable, os.path.abspath(__file__)] + [a for a in sys.argv[1:]
                                                          if a not in ("--matrix", "--glibc-default")]
    configs = [("tapelab's allocator policy (freed memory kept)", [], {}),
               ("--glibc-default", ["--glibc-default"], {})]
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
        unset = {"OPENBLAS_CORETYPE": None, "OPENBLAS_L2_SIZE": None}
        configs += [("OPENBLAS_CORETYPE/L2_SIZE unset", [], unset),
                    ("--glibc-default, OPENBLAS_CORETYPE/L2_SIZE unset", ["--glibc-default"], unset)]
    rc = 0
    for title, extra, env_change in configs:
        env = {k: v for k, v in os.environ.items() if env_change.get(k, v) is not None}
        print(f"\n######## {title}", flush=True)
        rc |= subprocess.call(base + extra, env=env)
    return rc


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.clock == "thread" and args.threads != 1:
        raise SystemExit("--clock thread measures the calling thread only: use it with --threads 1")
    global CLOCK
    CLOCK = time.thread_time if args.clock == "thread" else time.perf_counter
    if args.matrix:
        return run_matrix(args)
    if args.child:        # the protocol owns stdout; anything a library prints goes to stderr
        proto = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    # --- before numpy or torch allocate or start threads (children inherit the environment) ---
    if args.glibc_default:
        os.environ["TAPELAB_KEEP_FREED_MEMORY"] = "0"
    threads = (args.threads or int(os.environ.get("OPENBLAS_NUM_THREADS") or 0)
               or len(os.sched_getaffinity(0)))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if args.threads or var not in os.environ:
            os.environ[var] = str(threads)
    quick = args.quick
    settle = args.settle if args.settle is not None else (SETTLE_S if threads > 1 else 0.0)
    # seconds per repetition; above one thread 10x longer: after the settle pause the first steps wait
    # for a halted virtual CPU to wake (a 64x784x512 product on two threads: 156 us warm, 2.4-8 ms
    # first after a 20-150 ms pause on the project machine, either library's OpenMP threads), so
    # 20 ms repetitions timed mostly that wake-up, not the steady steps of a training loop
    target = (0.005 if quick else 0.02) * (10 if threads > 1 else 1)
    warmup_s = 0.05 if quick else 0.2

    if args.child:
        return serve(LocalSide(args.child, import_side(args.child, threads), target, warmup_s, settle), proto)
    from workloads import REGISTRY
    if args.profile:
        import tapelab
        return profile(args, [w for w in REGISTRY if args.profile.lower() in w.name.lower()], tapelab,
                       {"mlp_api": args.mlp_api})
    processes = threads > 1 if args.processes is None else args.processes
    reps = args.reps or (5 if quick else 15)
    selected = [w for w in REGISTRY if args.filter.lower() in w.name.lower() and (w.quick or not quick)]

    with contextlib.ExitStack() as stack:
        if processes:
            child_args = ["--clock", args.clock, "--settle", str(settle)] + (["--quick"] if quick else []) + \
                         (["--threads", str(args.threads)] if args.threads else [])
            sides = {side: stack.enter_context(ChildSide(side, child_args)) for side in SIDES}
        else:
            sides = {side: LocalSide(side, import_side(side, threads), target, warmup_s, settle) for side in SIDES}
        info = {side: s.info() for side, s in sides.items()}
        mlp_api = args.mlp_api if args.mlp_api != "auto" else info["tapelab"]["mlp_api"]
        print_header(args, threads, info, processes, sides, reps, target, warmup_s, settle)
        rows = []
        variants = set()
        for w in selected:
            rows.append(measure(w, sides, {"mlp_api": mlp_api}, reps, variants))
            print_row(rows[-1], header=len(rows) == 1)
        print()
        for v in sorted(variants):
            print(f"  MLP written as: {v}")
        for n in summary_notes(rows):
            print("  " + n)
        if processes:
            for side, s in sides.items():
                foreign = s.close()
                if foreign:
                    print(f"  WARNING: {side}'s process imported {', '.join(foreign)}: the sides are not separate")
    return 0


def print_header(args, threads, info, processes, sides, reps, target, warmup_s, settle) -> None:
    t, h = info["tapelab"], info["torch"]
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print("tapelab bench" + (" (--quick)" if args.quick else ""))
    print(f"  machine      : {platform.machine()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
          f"load average {load}")
    print(f"  versions     : Python {platform.python_version()}, numpy {t['numpy']}, "
          f"torch {h['version']}, tapelab {t['version']}")
    print(f"  threads      : torch.set_num_threads({threads}); OPENBLAS/OMP/MKL_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}/{os.environ['OMP_NUM_THREADS']}/{os.environ['MKL_NUM_THREADS']}")
    print(f"  allocator    : {t['allocator']}")
    print(f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')} -> numpy: {t['openblas']}")
    print(f"  tapelab GEMM : {t['gemm']}")
    print(f"  torch CPU    : {h['cpu']} kernels, MKL {'yes' if h['mkl'] else 'no'}")
    if processes:
        print(f"  processes    : one per library, started once: tapelab + numpy floor (pid {sides['tapelab'].pid}), "
              f"torch (pid {sides['torch'].pid}); neither imports the other library")
    else:
        print("  processes    : both libraries in this one process (--in-process)")
    busy = load != "?" and os.getloadavg()[0] > len(os.sched_getaffinity(0))
    if busy:
        print(f"  WARNING      : the machine is busy (1-min load {os.getloadavg()[0]:.1f} on "
              f"{len(os.sched_getaffinity(0))} CPUs): wall-clock numbers, multi-threaded ones most of all, "
              f"measure the other load; prefer --threads 1 --clock thread and compare ratios")
    pause = f", each followed by a {settle * 1e3:.0f} ms pause (--settle)" if settle else ""
    print(f"  timing       : {args.clock} clock, median of {reps} repetitions of >= {target * 1e3:.0f} ms each, after "
          f"{warmup_s * 1e3:.0f} ms warm-up; sides alternate{pause}; gc on")
    print()


def import_side(side: str, threads: int):
    """Import one library under test (torch also gets its thread count)."""
    if side == "tapelab":
        import tapelab
        return tapelab
    import torch
    torch.set_num_threads(threads)
    return torch


def gemm_info(m) -> str:
    """Which GEMM tapelab's float products take: MKL's (the [mkl] extra) from ``MKL_MIN`` multiply-adds, else
    our own and numpy's OpenBLAS."""
    import importlib
    import importlib.metadata
    from tapelab.kernels import blas
    if not blas.available():
        return "own float32 GEMM where it is faster, else numpy's OpenBLAS (MKL not loaded)"
    try:
        version = importlib.metadata.version("mkl")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    from tapelab.kernels import mkl
    floor = importlib.import_module("tapelab.kernels.gemm").MKL_MIN
    return (f"MKL {version} cblas_?gemm from {floor} multiply-adds ({mkl.threading_layer()} threading), "
            "smaller ones own/OpenBLAS")


def library_info(side: str, m) -> dict:
    """What the header reports about one side, gathered where that side runs."""
    if side == "tapelab":
        import numpy as np

        from workloads import Context, _use_nn
        nn = _use_nn(m, Context(side, m, {"mlp_api": "auto"}))
        return {"numpy": np.__version__, "version": m.__version__, "allocator": allocator_description(),
                "openblas": openblas_info(), "mlp_api": "nn" if nn else "plain", "gemm": gemm_info(m)}
    cap = getattr(getattr(m.backends, "cpu", None), "get_cpu_capability", lambda: "?")()
    return {"version": m.__version__, "cpu": cap, "mkl": m.backends.mkl.is_available()}


class LocalSide:
    """One library's step for the current workload (and, for tapelab, the numpy floor), in this process."""

    def __init__(self, side: str, m, target: float, warmup_s: float, settle: float):
        self.side, self.m, self.target, self.warmup_s, self.settle = side, m, target, warmup_s, settle
        self.stack = contextlib.ExitStack()
        self.steps, self.loops = {}, {}

    def info(self) -> dict:
        return library_info(self.side, self.m)

    def setup(self, name: str, options: dict) -> dict:
        """Build the step of workload ``name``, call it once (its value), warm it up and calibrate it."""
        import numpy as np

        from workloads import REGISTRY, Context
        w = next(w for w in REGISTRY if w.name == name)
        missing = w.missing(self.m) if self.side == "tapelab" else []   # torch is the reference
        if missing:
            return {"status": "n/a (needs " + ", ".join(missing) + ")"}
        out = {}
        try:
            step = self.stack.enter_context(w.session(self.m, Context(self.side, self.m, options)))
            out["variant"] = getattr(step, "variant", None)
            first = step()            # the value, to check both sides compute the same
            if hasattr(first, "item"):
                out["first"] = first.detach().item()
            self.steps = {self.side: step}
            if self.side == "tapelab" and w.floor is not None:   # plain numpy, same process (no value check)
                self.steps["floor"] = w.floor(np.random.default_rng(0))
            self.loops = {}
            for k, s in self.steps.items():
                with self._blas(k):
                    self.loops[k] = calibrate(s, self.target, self.warmup_s)
        except BaseException:
            self.teardown()
            raise
        time.sleep(self.settle)
        return out

    def round(self) -> dict:
        """One timed repetition of each step held (seconds per call), then the settle pause."""
        times = {}
        for k, s in self.steps.items():
            with self._blas(k):
                times[k] = time_reps(s, self.loops[k])
        time.sleep(self.settle)
        return times

    @staticmethod
    def _blas(step: str):
        """The numpy floor with the BLAS's own threads: tapelab holds numpy's BLAS at one thread in
        its process and splits GEMMs over its own pool (engine/base/pool.py), the floor is plain
        numpy as a user would run it."""
        threads = int(os.environ.get("OPENBLAS_NUM_THREADS") or 1)
        if step != "floor" or threads == 1:
            return contextlib.nullcontext()
        from threadpoolctl import threadpool_limits
        return threadpool_limits(threads, user_api="blas")

    def teardown(self) -> None:
        self.steps, self.loops = {}, {}
        self.stack.close()


def serve(local: LocalSide, proto) -> int:
    """The child's loop: one JSON command per stdin line, one JSON reply per line on ``proto``.

    Between commands the process blocks in the read; its BLAS/OpenMP pool spins a while after its
    last call, which the settle pause at the end of each set-up and round waits out. Each round's
    reply says how much CPU the process used from its previous round's reply to this round
    ("_idle": CPU seconds, wall seconds): what it took while the other side ran."""
    handlers = {"info": local.info, "setup": local.setup, "round": local.round, "teardown": local.teardown}
    last = None       # (process CPU time, wall time) at the end of this side's previous round of the row
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "exit":
            other = "torch" if local.side == "tapelab" else "tapelab"
            proto.write(json.dumps({"ok": [other] if other in sys.modules else []}) + "\n")
            return 0
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            reply = {"ok": handlers[msg["op"]](*msg.get("args", ()))}
        except Exception as e:  # noqa: BLE001 - reported to the parent, where it becomes the row's status
            reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}"}
        if msg["op"] == "round" and "ok" in reply:
            if last is not None:   # CPU this process (all its threads) used while the other side ran,
                #                    its own settle pause excluded
                reply["ok"]["_idle"] = [cpu - last[0], wall - last[1]]
            last = time.process_time(), time.perf_counter()
        else:
            last = None
        proto.write(json.dumps(reply) + "\n")
    return 0


class ChildSide:
    """A LocalSide in a child process of its own (this script with --child), driven over its pipes."""

    def __init__(self, side: str, child_args: list):
        self.side = side
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", side, *child_args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self.proc.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def _call(self, op: str, *args):
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.side} process exited (code {self.proc.wait()}); see its stderr above")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["ok"]

    def info(self) -> dict:
        return self._call("info")

    def setup(self, name: str, options: dict) -> dict:
        return self._call("setup", name, options)

    def round(self) -> dict:
        return self._call("round")

    def teardown(self) -> None:
        self._call("teardown")

    def close(self) -> list:
        """End the child; returns the other library's name if the child had imported it."""
        foreign = self._call("exit")
        self.proc.wait()
        return foreign


def calibrate(step, target: float, warmup_s: float) -> int:
    """Warm up for warmup_s, then return how many calls make one repetition of >= target seconds."""
    t0 = time.perf_counter()
    calls = 0
    while True:
        step()
        calls += 1
        el = time.perf_counter() - t0
        if el >= warmup_s and calls >= 3:
            break
    per = el / calls
    return max(1, int(target / per) + 1)


def time_reps(step, n: int) -> float:
    clock = CLOCK
    t0 = clock()
    for _ in range(n):
        step()
    return (clock() - t0) / n


def measure(w, sides, options, reps, variants) -> dict:
    """One row: set up each side (tapelab first), then ``reps`` rounds alternating between the sides."""
    import statistics

    row = {"name": w.name, "group": w.group, "tapelab": float("nan"), "torch": float("nan"),
           "floor": float("nan"), "status": ""}
    ready = []
    try:
        for side, s in sides.items():
            out = s.setup(w.name, options)
            if out.get("status"):
                row["status"] = out["status"]
                return row
            ready.append((side, s))
            if out.get("variant"):
                variants.add(out["variant"])
            if out.get("first") is not None:
                row[side + "_first"] = out["first"]
        samples = {}
        for _ in range(reps):
            for side, s in ready:
                times = s.round()
                cpu, wall = times.pop("_idle", (0.0, 0.0))
                row["idle_cpu_" + side] = row.get("idle_cpu_" + side, 0.0) + cpu
                row["idle_wall_" + side] = row.get("idle_wall_" + side, 0.0) + wall
                for k, t in times.items():
                    samples.setdefault(k, []).append(t)
        for k, ts in samples.items():
            row[k] = statistics.median(ts)
            qs = statistics.quantiles(ts, n=4) if len(ts) >= 2 else [row[k]] * 3
            row[k + "_iqr"] = (qs[2] - qs[0]) / row[k]
    except Exception as e:   # noqa: BLE001 - a broken workload is a row, not a crash
        row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}"
    finally:
        for _, s in ready:
            with contextlib.suppress(Exception):
                s.teardown()
    return row


def print_row(row, header=False):
    if header:
        print(f"{'workload':<42} {'tapelab':>12} {'torch':>12} {'torch/tapelab':>14} {'numpy floor':>12}"
              f"  spread (IQR t/T/f)")
        print("-" * 114)
    ratio = row["torch"] / row["tapelab"] if row["tapelab"] == row["tapelab"] and row["torch"] == row["torch"] else None
    if row["status"]:
        print(f"{row['name']:<42} {row['status']}")
        return
    fl = f"/{row['floor_iqr']:.0%}" if "floor_iqr" in row else ""
    print(f"{row['name']:<42} {fmt_time(row['tapelab']):>12} {fmt_time(row['torch']):>12} "
          f"{ratio:>13.2f}x {fmt_time(row['floor']):>12}  {row['tapelab_iqr']:.0%}/{row['torch_iqr']:.0%}{fl}",
          flush=True)


def summary_notes(rows) -> list[str]:
    by = {r["name"]: r for r in rows if not r["status"]}
    notes = []
    for base, obs in (("chain16 fwd+bwd", "chain16 fwd+bwd, op subscriber"),
                      ("chain16 fwd (no_grad)", "chain16 fwd (no_grad), op subscriber")):
        if base in by and obs in by:
            d = by[obs]["tapelab"] - by[base]["tapelab"]
            dt = by[obs]["torch"] - by[base]["torch"]
            notes.append(f"op subscriber on '{base}': tapelab +{d * 1e6:.1f} µs ({d / by[base]['tapelab']:+.0%}), "
                         f"torch dispatch mode +{dt * 1e6:.1f} µs ({dt / by[base]['torch']:+.0%})")
    base = "MLP 784-512-512-10 step, batch 64"
    for suffix, goal in ((", tape", ""), (", inspector streaming", " (goal: under +15%)"),
                         (", profiled", " (goal: under +20%)")):
        if base in by and base + suffix in by:
            d = by[base + suffix]["tapelab"] - by[base]["tapelab"]
            dt = by[base + suffix]["torch"] - by[base]["torch"]
            notes.append(f"cost{suffix}: tapelab +{d * 1e3:.2f} ms ({d / by[base]['tapelab']:+.0%}){goal}; "
                         f"torch {dt / by[base]['torch']:+.0%} on '{base}'")
    for r in by.values():
        a, b = r.get("tapelab_first"), r.get("torch_first")
        if a is not None and b is not None:
            agree = "agree" if abs(a - b) <= 1e-4 * max(1.0, abs(b)) else "DIFFER (timing a different computation!)"
            notes.append(f"{r['name']}: first-step loss tapelab {a:.6f}, torch {b:.6f}: {agree}")
    for side in ("tapelab", "torch"):
        idle = [(r["idle_cpu_" + side], r["idle_wall_" + side], r["name"]) for r in by.values()
                if r.get("idle_wall_" + side)]
        if idle:
            cpu, wall = sum(i[0] for i in idle), sum(i[1] for i in idle)
            worst = max(idle, key=lambda i: i[0] / i[1])
            notes.append(f"{side}'s process while the other side ran: {cpu / wall:.1%} of a CPU on average "
                         f"(its idle threads spinning), at most {worst[0] / worst[1]:.1%} ('{worst[2]}')")
    if "chain16 fwd (no_grad)" in by:
        r = by["chain16 fwd (no_grad)"]
        notes.append(f"per op, forward, no_grad (6 ops): tapelab {r['tapelab'] / 6 * 1e6:.2f} µs, "
                     f"torch {r['torch'] / 6 * 1e6:.2f} µs")
    return notes


def profile(args, matches, tapelab, options) -> int:
    import cProfile
    import pstats

    from workloads import Context
    if not matches:
        print(f"no workload matches {args.profile!r}", file=sys.stderr)
        return 2
    w = matches[0]
    with w.session(tapelab, Context("tapelab", tapelab, options)) as step:
        for _ in range(200):
            step()
        prof = cProfile.Profile(CLOCK)
        prof.enable()
        for _ in range(args.profile_calls):
            step()
        prof.disable()
    print(f"cProfile ({args.clock} clock), tapelab side of {w.name!r}, {args.profile_calls} calls "
          f"(times include profiler overhead; compare shares, not absolutes)\n")
    root = os.path.dirname(HERE) + os.sep
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime")
    total = sum(v[2] for v in stats.stats.values())
    print(f"{'tottime':>8} {'share':>6} {'calls/step':>10}  function")
    for (fname, line, func), (cc, nc, tt, ct, _) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:25]:
        where = fname.replace(root, "") if fname.startswith(root) else os.path.basename(fname)
        print(f"{tt:8.3f} {tt / total:6.1%} {nc / args.profile_calls:10.1f}  {where}:{line}({func})")
    print(f"\ntotal {total:.3f} s -> {total / args.profile_calls * 1e6:.1f} µs per step under the profiler")
    return 0


CLOCK = time.perf_counter

if __name__ == "__main__":
    sys.exit(main())
