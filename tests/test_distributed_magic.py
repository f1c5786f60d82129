"""``%%distributed``'s helper (kernel/distributed.py): per-rank output, rank 0's tape, a failing
rank and the timeout turned into ``DistributedCellError``.

By default the helper drives a stand-in for ipyparallel's client (what it polls: ``stdout``,
``ready()``, ``successful()``, ``get()``); with --long it starts two real ipyparallel MPI engines
(about 10 s on a quiet machine), runs a cell with a collective and then a cell whose rank 1 raises
while rank 0 waits in a barrier.
"""
from __future__ import annotations

import pytest

pytest.importorskip("IPython")
from tapelab.kernel.distributed import DistributedCellError, RankCluster, _parser  # noqa: E402


class _Job:
    def __init__(self, out: str, error: BaseException | None = None, done: bool = True):
        self.stdout, self.stderr, self._error, self._done = out, "", error, done

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
    assert "with _tapelab.tape() as _tapelab_rank0_tape:" in c.client.sent[11]    # engine 11 is rank 0
    assert "'train()'" in c.client.sent[11] and c.client.sent[10] == "train()"
    assert c.rank0_graph == {"pulled": "_tapelab_rank0_graph", "from": 11}


def test_a_failing_rank_stops_the_engines_and_is_named():
    c = _cluster({10: _Job("", ValueError("bad batch")), 11: _Job("", done=False)})   # rank 0 waits in a collective
    with pytest.raises(DistributedCellError, match=r"rank 1 of 2 failed \(the engines were stopped\):\n"
                                                   r"ValueError: bad batch"):
        c.run("step()", timeout=5, write=lambda s: None)
    assert c.stopped


def test_the_timeout_stops_the_engines():
    c = _cluster({10: _Job("", done=False), 11: _Job("")})
    with pytest.raises(DistributedCellError, match=r"did not finish within 0.2 s on ranks \[1\]"):
        c.run("hang()", timeout=0.2, write=lambda s: None)
    assert c.stopped


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
        with pytest.raises(DistributedCellError, match=r"(?s)rank 1 of 2 failed.*ValueError: bad rank"):
            c.run("if d.get_rank() == 1:\n    raise ValueError('bad rank')\nd.barrier()", 60, lines.append)
    finally:
        c.stop()
