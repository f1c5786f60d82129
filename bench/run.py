#!/usr/bin/env python
"""Time the same workloads in tapelab and PyTorch, in one process, and print one table.

    python bench/run.py                  # all workloads
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
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

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

    # --- before numpy or torch allocate or start threads ---
    if args.glibc_default:
        os.environ["TAPELAB_KEEP_FREED_MEMORY"] = "0"
    threads = (args.threads or int(os.environ.get("OPENBLAS_NUM_THREADS") or 0)
               or len(os.sched_getaffinity(0)))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if args.threads or var not in os.environ:
            os.environ[var] = str(threads)

    import platform

    import numpy as np
    import torch

    import tapelab
    from workloads import REGISTRY, Context

    torch.set_num_threads(threads)
    sides = {"tapelab": tapelab, "torch": torch}
    quick = args.quick
    reps = args.reps or (5 if quick else 15)
    target = 0.005 if quick else 0.02          # seconds per repetition
    warmup_s = 0.05 if quick else 0.2
    options = {"mlp_api": args.mlp_api}

    selected = [w for w in REGISTRY if args.filter.lower() in w.name.lower() and (w.quick or not quick)]
    if args.profile:
        return profile(args, [w for w in REGISTRY if args.profile.lower() in w.name.lower()], tapelab, options)

    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print("tapelab bench" + (" (--quick)" if quick else ""))
    print(f"  machine      : {platform.machine()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
          f"load average {load}")
    print(f"  versions     : Python {platform.python_version()}, numpy {np.__version__}, "
          f"torch {torch.__version__}, tapelab {tapelab.__version__}")
    print(f"  threads      : torch.set_num_threads({threads}); OPENBLAS/OMP/MKL_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}/{os.environ['OMP_NUM_THREADS']}/{os.environ['MKL_NUM_THREADS']}")
    print(f"  allocator    : {allocator_description()}")
    print(f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')} -> numpy: {openblas_info()}")
    cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: "?")()
    print(f"  torch CPU    : {cap} kernels, MKL {'yes' if torch.backends.mkl.is_available() else 'no'}")
    busy = load != "?" and os.getloadavg()[0] > len(os.sched_getaffinity(0))
    if busy:
        print(f"  WARNING      : the machine is busy (1-min load {os.getloadavg()[0]:.1f} on "
              f"{len(os.sched_getaffinity(0))} CPUs): wall-clock numbers, multi-threaded ones most of all, "
              f"measure the other load; prefer --threads 1 --clock thread and compare ratios")
    print(f"  timing       : {args.clock} clock, median of {reps} repetitions of >= {target * 1e3:.0f} ms each, after "
          f"{warmup_s * 1e3:.0f} ms warm-up; sides alternate; gc on")
    print()

    rows = []
    variants = set()
    for w in selected:
        rows.append(measure(w, sides, options, reps, target, warmup_s, variants))
        print_row(rows[-1], header=len(rows) == 1)
    print()
    for v in sorted(variants):
        print(f"  MLP written as: {v}")
    notes = summary_notes(rows)
    for n in notes:
        print("  " + n)
    return 0


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


def measure(w, sides, options, reps, target, warmup_s, variants) -> dict:
    import contextlib
    import statistics

    from workloads import Context

    import numpy as np

    row = {"name": w.name, "group": w.group, "tapelab": float("nan"), "torch": float("nan"),
           "floor": float("nan"), "status": ""}
    missing = w.missing(sides["tapelab"])
    if missing:
        row["status"] = "n/a (needs " + ", ".join(missing) + ")"
        return row
    try:
        with contextlib.ExitStack() as stack:
            steps, loops, samples = {}, {}, {}
            for side, m in sides.items():
                ctx = Context(side, m, options)
                steps[side] = stack.enter_context(w.session(m, ctx))
                if getattr(steps[side], "variant", None):
                    variants.add(steps[side].variant)
            for side, step in steps.items():
                out = step()          # first call: the value, to check both sides compute the same
                if hasattr(out, "item"):
                    row[side + "_first"] = out.detach().item()
            if w.floor is not None:   # the same step in plain numpy, timed alongside (no value check)
                steps["floor"] = w.floor(np.random.default_rng(0))
            for side, step in steps.items():
                loops[side] = calibrate(step, target, warmup_s)
                samples[side] = []
            for _ in range(reps):
                for side, step in steps.items():
                    samples[side].append(time_reps(step, loops[side]))
            for side in steps:
                row[side] = statistics.median(samples[side])
                qs = statistics.quantiles(samples[side], n=4) if len(samples[side]) >= 2 else [row[side]] * 3
                row[side + "_iqr"] = (qs[2] - qs[0]) / row[side]
    except Exception as e:   # noqa: BLE001 - a broken workload is a row, not a crash
        row["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}"
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
