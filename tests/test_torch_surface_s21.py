"""``torch.*`` names library code calls that tapelab lacked (session 21), each against PyTorch 2.13:
the ``sym_*`` helpers on plain sizes, ``compiled_with_cxx11_abi``, ``has_spectral``,
``thread_safe_generator`` and ``WorkerInfo``'s ``rng``/``worker_method``."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import tapelab
from tapelab.utils.data.dataloader import WorkerInfo

CALLS = [("sym_int", (2.7,)), ("sym_int", (-2.7,)), ("sym_int", (True,)), ("sym_int", ("3",)), ("sym_float", (3,)),
         ("sym_max", (3, 2.5)), ("sym_max", (2, 3)), ("sym_max", (True, 2)), ("sym_min", (1, 2.5)), ("sym_min", (4, 2)),
         ("sym_not", (0,)), ("sym_not", (3,)), ("sym_ite", (True, 1, 2)), ("sym_ite", (False, "a", "b")),
         ("sym_sqrt", (4,)), ("sym_sum", ([1, 2.5],)), ("sym_sum", ([],)), ("sym_fresh_size", (5,)),
         ("sym_constrain_range", (5,)), ("sym_constrain_range_for_size", (5,)), ("compiled_with_cxx11_abi", ())]


@pytest.mark.parametrize("name,args", CALLS, ids=[f"{n}{a}" for n, a in CALLS])
def test_sym_helpers_are_pytorchs_on_plain_numbers(name, args):
    want = getattr(torch, name)(*args)
    got = getattr(tapelab, name)(*args)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("call", ["sym_constrain_range(5, min=6)", "sym_constrain_range(5, max=3)",
                                  "sym_constrain_range_for_size(-1)", "sym_ite(0, 1, 2)", "sym_ite(True, 1, 2.0)",
                                  "sym_max(2, 'a')", "sym_sqrt(-1.0)"])
def test_sym_helpers_refuse_as_pytorch(call):
    with pytest.raises(Exception) as want:
        eval("torch." + call)
    with pytest.raises(want.type) as got:
        eval("tapelab." + call)
    if want.type is RuntimeError:
        assert str(got.value) == str(want.value)


def test_has_spectral_says_fft_exists():
    assert tapelab.has_spectral is torch.has_spectral is True


def test_thread_safe_generator_and_worker_info_fields():
    assert tapelab.thread_safe_generator() is None is torch.thread_safe_generator()
    assert tapelab.random.thread_safe_generator() is None
    fields = [f.name for f in dataclasses.fields(WorkerInfo)]
    assert fields[-2:] == ["rng", "worker_method"]

    class Probe(tapelab.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            info = tapelab.utils.data.get_worker_info()
            return tapelab.tensor([info.worker_method == "multiprocessing", info.rng is None,
                                   tapelab.thread_safe_generator() is None])
    batches = list(tapelab.utils.data.DataLoader(Probe(), batch_size=2, num_workers=1))
    assert batches[0].all()
