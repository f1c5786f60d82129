"""Profile a small training loop with torch.profiler: a schedule with on_trace_ready,
record_function ranges (context manager and decorator), key_averages tables and a
chrome trace. An ordinary PyTorch program: tests/test_pytorch_scripts.py runs it with the
real torch and with ``torch`` bound to tapelab and compares what it prints (counts, names,
losses; never times).
"""
import json
import os
import tempfile

import numpy as np
import torch

nn = torch.nn
profiler = torch.profiler

rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((16, 8)).astype(np.float32))
Y = torch.tensor(rng.standard_normal((16, 1)).astype(np.float32))

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.tensor(np.random.default_rng(len(name) + p.numel()).uniform(-0.3, 0.3, p.shape)
                             .astype(np.float32)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


@profiler.record_function("loss_fn")
def loss_fn(out, y):
    return ((out - y) ** 2).mean()


ready = []


def on_ready(prof):
    rows = {e.key: e for e in prof.key_averages()}
    ready.append((prof.step_num, rows["forward"].count, rows["backward"].count, rows["loss_fn"].count))


losses = []
sched = profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
with profiler.profile(activities=[profiler.ProfilerActivity.CPU], schedule=sched, on_trace_ready=on_ready,
                      record_shapes=True) as prof:
    for step in range(10):
        opt.zero_grad()
        with profiler.record_function("forward"):
            loss = loss_fn(model(X), Y)
        with profiler.record_function("backward"):
            loss.backward()
        opt.step()
        losses.append(loss.item())
        prof.step()

print("losses", [round(v, 5) for v in losses])
print("ready", ready)

with profiler.profile(activities=[profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
    with profiler.record_function("eval"):
        with torch.no_grad():
            out = model(X)
table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
header = table.splitlines()[1].split("  ")
print("columns", [h.strip() for h in header if h.strip()][:6])
print("eval_calls", [e.count for e in prof.key_averages() if e.key == "eval"])
shaped = prof.key_averages(group_by_input_shape=True).table(row_limit=3)
print("has_input_shapes", "Input Shapes" in shaped)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
names = sorted({e["name"] for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"] == "eval"})
print("trace_ranges", names)
print("out", [round(v, 5) for v in out.flatten().tolist()[:4]])
