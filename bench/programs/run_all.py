"""Run every program here under tapelab and torch (one process each, one after the other) and
print their per-step times side by side.

    python bench/programs/run_all.py --steps 30 --threads 1 --clock thread
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = [("GPT d128", ["gpt.py", "--d", "128"]), ("GPT d384", ["gpt.py", "--d", "384"]),
            ("LSTM LM 2x200", ["lstm_lm.py"]), ("ResNet basic blocks", ["resnet.py"]), ("GCN sparse", ["gcn.py"]),
            ("cell LM rnn", ["cell_lm.py", "--cell", "rnn"]), ("cell LM gru", ["cell_lm.py", "--cell", "gru"]),
            ("Llama-style decoder", ["llama.py"])]


def per_step(lib: str, script: list, extra: list) -> tuple[float, str]:
    out = subprocess.run([sys.executable, os.path.join(HERE, script[0]), *script[1:], "--lib", lib, *extra],
                         capture_output=True, text=True)
    found = re.search(r"per-step: median ([\d.]+) ms", out.stdout)
    if not found:
        return float("nan"), (out.stderr.strip().splitlines() or ["?"])[-1][:80]
    first = re.search(r"first loss ([\d.]+)", out.stdout)
    return float(found.group(1)), first.group(1) if first else ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--clock", choices=("wall", "thread"), default="wall")
    p.add_argument("-k", dest="filter", default="")
    args = p.parse_args()
    extra = ["--steps", str(args.steps), "--clock", args.clock] + (["--threads", str(args.threads)] if args.threads else [])
    print(f"{'program':<22} {'tapelab ms/step':>16} {'torch ms/step':>14} {'torch/tapelab':>14}  first losses (t / T)")
    for name, script in PROGRAMS:
        if args.filter.lower() not in name.lower():
            continue
        t, tl = per_step("tapelab", script, extra)
        h, hl = per_step("torch", script, extra)
        print(f"{name:<22} {t:>16.2f} {h:>14.2f} {h / t:>13.2f}x  {tl} / {hl}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
