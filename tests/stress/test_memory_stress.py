"""A streamed training loop's memory is flat after warm-up (issue 16, defect 2).

Each loop runs in a fresh interpreter, which reports its resident set size (``/proc/self/statm``)
every few steps: after the warm-up the RSS may not grow past a bound (the issue's goal is under
20 MB for an hour; the short version runs a few hundred steps and allows 8 MB), and the records
kept stay bounded however many steps ran.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

LOOP = textwrap.dedent("""
    import gc, json, sys, warnings
    import tapelab as T
    from tapelab.widgets.live import LiveTape

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    kind, steps, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(32, 64), T.nn.ReLU(), T.nn.Linear(64, 10))
    opt = T.optim.Adam(model.parameters(), lr=1e-3)
    x, y = T.randn(16, 32), T.randint(0, 10, (16,))
    sent = []
    rec = (LiveTape(sinks=[sent.append], rate=1e9) if kind == "live-every-step" else
           LiveTape(sinks=[sent.append]) if kind == "live" else T.tape(max_records=2000))
    series, kept = [], []
    warnings.simplefilter("ignore", RuntimeWarning)      # the capped tape's one "dropping" warning
    with rec:
        for i in range(steps):
            opt.zero_grad()
            T.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if i % every == 0:
                sent.clear()                             # a sink forwards deltas; it keeps none
                gc.collect()
                series.append(rss_mb())
                kept.append(len(rec))
    print(json.dumps({"rss": series, "kept": kept, "dropped": rec.dropped}))
""")


def _run(kind: str, steps: int, every: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", LOOP, kind, str(steps), str(every)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="RSS read from /proc (Linux)")
@pytest.mark.parametrize("kind", ["live", "live-every-step", "tape-capped"])
def test_streamed_loop_rss_is_flat_after_warm_up(kind, long):
    steps, every, warm = (6000, 200, 1000) if long else (300 if kind == "live-every-step" else 400, 50, 100)
    out = _run(kind, steps, every)
    rss, kept = out["rss"], out["kept"]
    after = rss[warm // every:]
    growth = max(after) - after[0]
    assert growth < (20 if long else 8), f"RSS grew {growth:.1f} MB after warm-up: {rss}"
    assert max(kept[warm // every:]) <= max(kept[:warm // every + 1]) * 2, kept   # records kept: bounded
    assert out["dropped"] > 0
