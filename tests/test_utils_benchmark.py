"""``tapelab.utils.benchmark`` against ``torch.utils.benchmark``: the same statistics and the same printed
text from the same raw times, and Timer's measuring loops on real statements."""
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.benchmark as TB

import tapelab
import tapelab.utils.benchmark as B

RNG = np.random.default_rng(0)


def _pair(stmt, raw, number=100, **spec):
    """The same Measurement built in both libraries."""
    setup = spec.pop("setup", "pass")
    ours = B.Measurement(number, list(raw), B.TaskSpec(stmt, setup, **spec))
    theirs = TB.Measurement(number, list(raw), TB.TaskSpec(stmt, setup, **spec))
    return ours, theirs


def _body(m) -> str:
    """A Measurement's text without its first line (the object's address and module)."""
    return repr(m).split("\n", 1)[1]


SAMPLES = [
    [2.5e-4, 2.6e-4, 2.55e-4, 2.52e-4, 2.7e-4, 2.51e-4],           # tight: no warning
    [1e-3, 1.5e-3, 0.9e-3, 1.2e-3, 2e-3, 1.1e-3, 0.8e-3],        # spread: a gross warning
    [3.1e-6, 3.0e-6, 3.5e-6, 3.3e-6],                              # fluctuation warning
    [4.2],                                                          # one replicate: no IQR line
    [5e-8, 6e-8],                                                   # nanoseconds, two replicates
    list(RNG.lognormal(-9, 0.05, 37)),
]


@pytest.mark.parametrize("raw", SAMPLES)
@pytest.mark.parametrize("spec", [dict(), dict(label="Add", sub_label="float", description="n=4"),
                                  dict(setup="import math\nx = 1", num_threads=4, env="ab")])
def test_measurement_statistics_and_text_equal_torch(raw, spec):
    ours, theirs = _pair("x + y" if "label" in spec else "a = 1\nb = a * 2", raw, **dict(spec))
    for name in ("median", "mean", "iqr", "times"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-12)
    assert ours.significant_figures == theirs.significant_figures
    assert ours.has_warnings == theirs.has_warnings
    assert ours.meets_confidence(0.05) == theirs.meets_confidence(0.05)
    assert (ours.title, ours.as_row_name, ours.env, ours.label) == (theirs.title, theirs.as_row_name, theirs.env,
                                                                     theirs.label)
    assert _body(ours) == _body(theirs)


def test_units_and_significant_figure_trimming_equal_torch():
    for t in [3e-10, 1e-9, 2.5e-8, 9.99e-7, 1e-6, 4.4e-5, 1e-3, 0.25, 1.0, 17.0, 1234.5]:
        assert B.select_unit(t) == TB.select_unit(t)
    for x in [3.14159, 0.000123456, 98765.4321, 1.05, 2.5, 0.95, 12.5]:
        for n in (1, 2, 3, 4):
            assert B.trim_sigfig(x, n) == TB.trim_sigfig(x, n)
    assert B.unit_to_english("us") == "microsecond"
    assert B.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]


def _grid(lib, raw_of):
    ms = []
    for threads in (1, 4):
        for sub in ("float", "int"):
            for desc in ("n=1", "n=64", "n=1024"):
                raw = raw_of(threads, sub, desc)
                ms.append(lib.Measurement(1000, raw, lib.TaskSpec("torch.add(x, y)", "pass", label="add",
                                                                  sub_label=sub, description=desc,
                                                                  num_threads=threads)))
    ms.append(lib.Measurement(10, [1e-3, 1.1e-3, 1.05e-3, 0.99e-3], lib.TaskSpec("x @ x", "pass", label="mm",
                                                                                 description="n=1")))
    return ms


def test_compare_prints_torch_s_tables():
    rng = np.random.default_rng(1)
    cache = {}

    def raw_of(threads, sub, desc):
        key = (threads, sub, desc)
        if key not in cache:
            base = {"n=1": 2e-6, "n=64": 9e-6, "n=1024": 4e-4}[desc] / threads * (1.5 if sub == "int" else 1)
            spread = 0.3 if (sub, desc) == ("int", "n=64") else 0.02
            cache[key] = list(base * 1000 * (1 + spread * rng.standard_normal(8)))
        return cache[key]
    ours, theirs = B.Compare(_grid(B, raw_of)), TB.Compare(_grid(TB, raw_of))
    assert str(ours) == str(theirs)
    for option in (("trim_significant_figures",), ("colorize",), ("highlight_warnings",)):
        for c in (ours, theirs):
            getattr(c, option[0])()
        assert str(ours) == str(theirs), option
    rowwise = [B.Compare(_grid(B, raw_of)), TB.Compare(_grid(TB, raw_of))]
    for c in rowwise:
        c.colorize(rowwise=True)
    assert str(rowwise[0]) == str(rowwise[1])
    assert "add" in str(ours) and "4 threads: " in str(ours)


def test_compare_merges_replicates_and_refuses_other_objects():
    spec = dict(stmt="f()", setup="pass", label="f")
    parts = [B.Measurement(10, [1e-4, 2e-4], B.TaskSpec(**spec)), B.Measurement(5, [6e-5], B.TaskSpec(**spec))]
    merged, = B.Measurement.merge(parts)
    assert merged.number_per_run == 1 and merged.times == pytest.approx([1e-5, 2e-5, 1.2e-5])
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        B.Compare([1.0])


def test_timer_measures_a_statement():
    x = tapelab.ones(8, 8)
    t = B.Timer("y = x @ x", setup="z = 2", globals={"x": x}, label="mm", sub_label="8", description="f32")
    m = t.timeit(50)
    assert m.number_per_run == 50 and len(m.raw_times) == 1 and 0 < m.median < 0.1
    blocked = t.blocked_autorange(min_run_time=0.02)
    assert blocked.number_per_run >= 10 and sum(blocked.raw_times) >= 0.02
    adaptive = t.adaptive_autorange(threshold=0.5, min_run_time=0.01, max_run_time=0.5)
    assert len(adaptive.raw_times) > 3 or sum(adaptive.raw_times) > 0.5
    assert "mm: 8\nf32" in repr(blocked)
    seen = []
    t.blocked_autorange(callback=lambda n, s: seen.append((n, s)), min_run_time=0.01)
    assert seen and all(n >= 1 and s > 0 for n, s in seen)


def test_timer_globals_default_torch_is_tapelab_and_threads_are_restored():
    before = tapelab.get_num_threads()
    seen = {}
    m = B.Timer("seen['torch'] = torch; seen['threads'] = torch.get_num_threads()", globals={"seen": seen},
                num_threads=2).timeit(3)
    assert seen == {"torch": tapelab, "threads": 2} and m.num_threads == 2
    assert tapelab.get_num_threads() == before


def test_timer_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match="only a `str` stmt"):
        B.Timer(lambda: None)
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        B.Timer("pass", global_setup="#include <x>")
    with pytest.raises(ValueError, match="Invalid language"):
        B.Timer("pass", language="rust")
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        B.Timer("pass").repeat()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        B.Timer("pass").autorange()
    with pytest.raises(NotImplementedError, match="C\\+\\+"):
        B.Timer("pass", language="c++")


def test_a_program_imports_torch_utils_benchmark_under_aliases():
    code = ("import tapelab; tapelab.install_aliases()\n"
            "import torch, torch.utils.benchmark as benchmark\n"
            "from torch.utils.benchmark import Timer, Compare\n"
            "x = torch.randn(4, 4)\n"
            "r = [Timer('x.sum()', globals={'x': x}, label='sum', description=str(n)).timeit(20) for n in (1, 2)]\n"
            "Compare(r).print()\n"
            "print(benchmark.Timer.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "[" in out and "sum" in out and "Times are in" in out and out.strip().endswith("tapelab.utils.benchmark.timer")
