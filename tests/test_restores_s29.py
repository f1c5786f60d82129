"""tests/conftest.py restores the intra-op thread counts and the eager loops' switch after every test
(the one place that does it): a test that changes them leaves the next test where it began, and a
process that never imported torch does not load it for the restore."""
import importlib.util
from pathlib import Path

import pytest

pytest_plugins = "pytester"

_TAPELAB_ONLY = """
import sys

import tapelab

START = tapelab.get_num_threads()


def test_a_sets_the_count():
    tapelab.set_num_threads(START + 1)


def test_b_begins_at_the_first_count():
    assert tapelab.get_num_threads() == START
    assert "torch" not in sys.modules
"""

_BOTH = """
import tapelab
import torch

START = tapelab.get_num_threads(), torch.get_num_threads()


def test_a_sets_both_counts():
    tapelab.set_num_threads(START[0] + 1)
    torch.set_num_threads(START[1] + 1)


def test_b_begins_at_the_first_counts():
    assert (tapelab.get_num_threads(), torch.get_num_threads()) == START
"""

_SWITCH = """
from tapelab import kernels

START = kernels.enabled()


def test_a_switches_the_loops():
    kernels.set_enabled(not START)
    assert kernels.enabled() != START


def test_b_begins_with_the_first_setting():
    assert kernels.enabled() == START
"""


@pytest.mark.parametrize("suite", [_TAPELAB_ONLY, _BOTH, _SWITCH], ids=["tapelab-only", "with-torch", "loops-switch"])
def test_each_test_ends_where_it_began(pytester, suite):
    if suite is _SWITCH and importlib.util.find_spec("numba") is None:
        pytest.skip("without numba the loops cannot be switched on")
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    pytester.makepyfile(test_settings=suite)
    pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(passed=2)
