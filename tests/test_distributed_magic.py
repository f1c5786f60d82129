"""``%%distributed``'s helper (kernel/distributed.py): per-rank output, rank 0's live tape, a
failing rank and the timeout turned into ``DistributedCellError``.

By default the helper drives a stand-in for ipyparallel's client (what it polls: ``stdout``,
``data``, ``ready()``, ``successful()``, ``get()``), and rank 0's recorder runs in this process
with its deltas published into such a stand-in one poll at a time; with --long it starts two real
ipyparallel MPI engines (about 10 s on a quiet machine), runs a cell with a collective, a cell
whose rank 0 tape must reach the notebook while it still runs, and then a cell whose rank 1 raises
while rank 0 waits in a barrier.
"""
from __future__ import annotations

import time

import pytest

pytest.importorskip("IPython")
from tapelab.kernel.distributed import DELTA_KEY, DistributedCellError, RankCluster, _parser, record_rank0  # noqa: E402


class _Job:
    def __init__(self, out: str, error: BaseException | None = None, done: bool = True):
        self.stdout, self.stderr, self._error, self._done = out, "", error, done
        self.data: dict = {}

    def ready(self) -> bool:
        return self._done

    def successful(self) -> bool:
        return self._error is None

    def get(self, timeout=None):
        if self._error is not None:
            raise self._error


class _Client:
    def __init__(self, jobs: dict):
        self.ids, self._jobs, self.sent = list(jobs), jobs, {}

    def __getitem__(self, eid):
        job, sent = self._jobs[eid], self.sent

        class _View:
            def execute(self, code, block=False, silent=False):
                sent[eid] = code
                return job

            def pull(self, name, block=True):
                return {"pulled": name, "from": eid}
        return _View()


def _cluster(jobs: dict) -> RankCluster:
    c = RankCluster(len(jobs))
    c.client, c.ranks = _Client(jobs), {eid: rank for eid, rank in zip(jobs, (1, 0))}
    c.stopped = False
    c.stop = lambda: setattr(c, "stopped", True)
    return c


def test_output_streams_per_rank():
    lines: list[str] = []
    c = _cluster({10: _Job("loss 0.5\n"), 11: _Job("loss 0.4\nloss 0.3\n")})
    assert c.run("train()", timeout=5, write=lines.append) == {0: "ok", 1: "ok"}
    assert lines == ["[rank 0] loss 0.4\n", "[rank 0] loss 0.3\n", "[rank 1] loss 0.5\n"]
    assert not c.stopped


def test_tape_records_rank_0_and_fetches_its_graph():
    c = _cluster({10: _Job("loss 0.5\n"), 11: _Job("")})
    c.run("train()", timeout=5, write=lambda s: None, tape=True)
    assert "_tapelab_record_rank0('train()', globals())" in c.client.sent[11]    # engine 11 is rank 0
    assert c.client.sent[10] == "train()"
    assert c.rank0_graph == {"pulled": "_tapelab_rank0_graph", "from": 11}


_STEPS = """import time
import tapelab as torch
lin = torch.nn.Linear(3, 2)
for _ in range(3):
    lin(torch.ones(4, 3)).sum().backward()
    time.sleep(0.12)          # a step a delta interval (0.1 s): one delta per step
"""


def test_rank_0_publishes_numbered_deltas_of_its_live_tape():
    published: list[dict] = []
    graph = record_rank0(_STEPS, {}, publish=published.append)
    assert len(published) >= 3
    assert [list(p) for p in published] == [[f"{DELTA_KEY}{i + 1}"] for i in range(len(published))]
    nodes = [n for i, p in enumerate(published) for n in p[f"{DELTA_KEY}{i + 1}"]["nodes"]]
    assert {n["op"] for n in nodes} >= {"linear", "sum"}
    assert {n["id"] for n in nodes} == {n["id"] for n in graph["nodes"]}


class _Rank0Stream(_Job):
    """Rank 0's engine as the client sees it: each poll one more published delta arrives; the
    cell is done once all have."""

    def __init__(self, published: list[dict]):
        super().__init__("", done=False)
        self.pending = list(published)

    def ready(self) -> bool:
        if self.pending:
            self.data.update(self.pending.pop(0))
        self._done = not self.pending
        return self._done


def test_the_notebook_gets_rank_0_deltas_in_order_while_the_cell_runs():
    published: list[dict] = []
    record_rank0(_STEPS, {}, publish=published.append)
    rank0 = _Rank0Stream([published[1], published[0], *published[2:]])    # delta 2 arrives before 1
    got: list[tuple] = []
    c = _cluster({10: _Job(""), 11: rank0})
    c.run("train()", timeout=5, write=lambda s: None, tape=True, on_delta=lambda d: got.append((d, rank0._done)))
    assert [d for d, _ in got] == [p[f"{DELTA_KEY}{i + 1}"] for i, p in enumerate(published)]
    early = [d for d, done in got if not done]        # reached the view while the cell ran
    assert any(n["op"] == "linear" for d in early for n in d["nodes"]), "rank 0's steps reached the view only after the cell"


def test_magic_registers_in_a_shell():
    from IPython.core.interactiveshell import InteractiveShell
    from tapelab.kernel.distributed import DistributedMagics
    ip = InteractiveShell.instance()
    ip.register_magics(DistributedMagics(ip))
    assert "distributed" in ip.magics_manager.magics["cell"]
    assert "distributed_stop" in ip.magics_manager.magics["line"]


def test_magic_arguments():
    ns = _parser().parse_args(["-n", "4", "--timeout", "30"])
    assert (ns.n, ns.timeout) == (4, 30.0)


def test_real_engines(request):
    if not request.config.getoption("--long"):
        pytest.skip("starting ipyparallel MPI engines takes ~10 s: in --long")
    pytest.importorskip("ipyparallel")
    pytest.importorskip("mpi4py")
    lines: list[str] = []
    c = RankCluster(2).start()
    try:
        c.run("import tapelab as torch\nd = torch.distributed\nd.init_process_group('gloo')\n"
              "x = (torch.ones(2, requires_grad=True) * (d.get_rank() + 1)).detach()\nd.all_reduce(x)\n"
              "print(x.tolist())", 120, lines.append, tape=True)
        assert sorted(lines) == ["[rank 0] [3.0, 3.0]\n", "[rank 1] [3.0, 3.0]\n"]
        assert any(n.get("op") == "mul" for n in c.rank0_graph["nodes"])   # rank 0's tape, in TapeView's form
        got: list[tuple] = []     # (when, delta): rank 0's deltas must arrive while its cell still sleeps
        c.run("import time\nlin = torch.nn.Linear(3, 2)\nfor _ in range(3):\n"
              "    lin(torch.ones(4, 3)).sum().backward()\n    d.barrier()\n    time.sleep(1.5)", 120, lines.append,
              tape=True, on_delta=lambda delta: got.append((time.monotonic(), delta)))
        end = time.monotonic()
        early = [delta for when, delta in got if when < end - 1.0]
        assert any(n["op"] == "linear" for delta in early for n in delta["nodes"]), got
        assert {n["id"] for _, delta in got for n in delta["nodes"]} == {n["id"] for n in c.rank0_graph["nodes"]}
        with pytest.raises(DistributedCellError, match=r"(?s)rank 1 of 2 failed.*ValueError: bad rank"):
            c.run("if d.get_rank() == 1:\n    raise ValueError('bad rank')\nd.barrier()", 60, lines.append)
    finally:
        c.stop()
