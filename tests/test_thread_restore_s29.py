"""tests/conftest.py restores the intra-op thread counts after every test (the one place that does it):
a test that sets them leaves the next test at the counts it began with, and a process that never
imported torch does not load it for the restore."""
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


@pytest.mark.parametrize("suite", [_TAPELAB_ONLY, _BOTH], ids=["tapelab-only", "with-torch"])
def test_each_test_ends_at_the_thread_counts_it_began_with(pytester, suite):
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    pytester.makepyfile(test_counts=suite)
    pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(passed=2)
