"""``state_dict``/``load_state_dict``'s extension points against PyTorch: ``_metadata`` versions,
load pre- and post-hooks (private and public forms), state-dict pre- and post-hooks, modules that
override ``_load_from_state_dict``/``_save_to_state_dict`` to rename keys, and extra state."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tapelab as tl

LIBS = (torch, tl)


def _net(lib):
    class Block(lib.nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 2)
            self.register_buffer("steps", lib.zeros((), dtype=lib.long))

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            if local_metadata.get("version", 1) < 2 and prefix + "dense.weight" in state_dict:   # an old name
                for kind in ("weight", "bias"):
                    state_dict[prefix + "fc." + kind] = state_dict.pop(prefix + "dense." + kind)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)

    net = lib.nn.Sequential(Block(), lib.nn.ReLU(), lib.nn.Linear(2, 1))
    with lib.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(lib.tensor(np.arange(p.numel(), dtype=np.float32).reshape(tuple(p.shape)) * 0.1 + i))
    return net


def _plain(sd) -> dict:
    return {k: v.numpy().tolist() for k, v in sd.items()}


def test_metadata_carries_each_modules_version():
    metas = [dict(_net(lib).state_dict()._metadata) for lib in LIBS]
    assert metas[1] == metas[0]
    assert metas[1]["0"] == {"version": 2} and metas[1][""] == {"version": 1}


def test_an_overridden_load_from_state_dict_reads_an_old_checkpoint():
    results = []
    for lib in LIBS:
        old = _net(lib).state_dict()
        for kind in ("weight", "bias"):
            old["0.dense." + kind] = old.pop("0.fc." + kind) * 3
        old._metadata["0"] = {"version": 1}
        fresh = _net(lib)
        keys = fresh.load_state_dict(old)
        results.append((repr(keys), _plain(fresh.state_dict())))
    assert results[1] == results[0]


def test_load_pre_and_post_hooks_private_and_public():
    results = []
    for lib in LIBS:
        net = _net(lib)
        calls = []

        def rename(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
            calls.append(("pre", prefix))
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")

        def public(module, state_dict, prefix, *rest):
            calls.append(("public", type(module).__name__, prefix))

        def post(module, keys):
            calls.append(("post", sorted(keys.missing_keys), sorted(keys.unexpected_keys)))
            keys.missing_keys.clear()
        net[2]._register_load_state_dict_pre_hook(rename)
        net[0].register_load_state_dict_pre_hook(public)
        net.register_load_state_dict_post_hook(post)
        sd = _net(lib).state_dict()
        sd["2.w"] = sd.pop("2.weight") * 2
        del sd["0.steps"]
        keys = net.load_state_dict(sd)     # the post-hook cleared the missing "0.steps"
        results.append((calls, repr(keys), _plain(net.state_dict())))
    assert results[1] == results[0]


def test_state_dict_pre_and_post_hooks():
    results = []
    for lib in LIBS:
        net = _net(lib)
        seen = []
        net[0].register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.append(prefix))
        net[2].register_state_dict_post_hook(lambda m, sd, prefix, meta: sd.pop(prefix + "bias") and None)
        handle = net._register_state_dict_hook(lambda m, sd, prefix, meta: {k.upper(): v for k, v in sd.items()})
        first = sorted(net.state_dict())
        handle.remove()
        results.append((seen, first, sorted(net.state_dict())))
    assert results[1] == results[0]


def test_extra_state_round_trip_and_strict_reports():
    results = []
    for lib in LIBS:
        class WithState(lib.nn.Linear):
            def __init__(self):
                super().__init__(2, 2)
                self.vocab = {"a": 1}

            def get_extra_state(self):
                return {"vocab": dict(self.vocab)}

            def set_extra_state(self, state):
                self.vocab = state["vocab"]
        src, dst = WithState(), WithState()
        src.vocab["b"] = 2
        sd = src.state_dict()
        dst.load_state_dict(sd)
        del sd["_extra_state"]
        with pytest.raises(RuntimeError) as err:
            WithState().load_state_dict(sd)
        plain = lib.nn.Linear(2, 2)
        keys = plain.load_state_dict(src.state_dict(), strict=False)
        results.append((sorted(src.state_dict()), dst.vocab, str(err.value), repr(keys)))
    assert results[1] == results[0]
