"""Non-Tensor arguments where PyTorch requires a Tensor, torch against tapelab, over every public function both have.

    python scripts/nontensor_args_survey.py            # the counts by outcome
    python scripts/nontensor_args_survey.py --list     # and each call that differs
    python scripts/nontensor_args_survey.py --json out.json

Each callable of torch, torch.nn.functional, torch.linalg, torch.special and torch.fft that tapelab also has
is first given a call that succeeds in torch (a tensor, then a few usual argument patterns: a second tensor,
a dim, two ints); then a numpy array, a list, None and a str take the place of the first tensor (and of the
second, where there is one), and torch's outcome (success, or the exception type and the parser's
``argument '<param>' (position <k>) must be Tensor, not <type>``) is compared with tapelab's. No timing:
the counts do not depend on the machine's load. Setters, factories and functions of no tensor are left out.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import types
import warnings

import numpy as np
import torch

import tapelab

MODULES = [("", torch, tapelab), ("nn.functional.", torch.nn.functional, tapelab.nn.functional),
           ("linalg.", torch.linalg, tapelab.linalg), ("special.", torch.special, tapelab.special),
           ("fft.", torch.fft, tapelab.fft)]
# names that change global state or make tensors from no tensor (a str or None would be taken as a value)
SKIP_PREFIXES = ("_", "set_", "use_", "manual_seed", "seed", "initial_seed", "compile", "load", "save", "get_", "is_",
                 "are_", "export", "vmap", "cond", "autocast", "no_grad", "enable_grad", "inference_mode", "typename",
                 "from_", "frombuffer", "asarray", "as_tensor", "tensor", "sparse_", "empty", "zeros", "ones", "full",
                 "rand", "arange", "range", "linspace", "logspace", "eye", "tril_indices", "triu_indices", "bartlett",
                 "blackman", "hamming", "hann", "kaiser", "scalar_tensor", "can_cast", "promote_types", "result_type",
                 "broadcast_shapes", "assert_")
SKIP = {"fork", "wait", "jit", "classproperty", "overload", "annotate", "align_tensors", "lu_unpack", "pixel_shuffle",
        "meshgrid", "block_diag", "cartesian_prod", "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d",
        "einsum", "chain_matmul", "multi_dot", "lobpcg", "svd_lowrank", "pca_lowrank", "symbolic_trace"}
T = "T"   # a tensor in a pattern
PATTERNS = [(T,), (T, T), (T, 0), (T, 1), (T, T, T), (T, 2), (T, [0]), (T, 0, 0), (T, 1, 2), (T, 2, 0), (T, 0, 1, 2)]
SHAPES = {"m": (3, 3), "b": (2, 3, 4, 4), "v": (4,), "i": (3, 3)}   # i: int64
_KEY = re.compile(r"argument '(\w+)' \(position (\d+)\) must be (.+?), not ([\w.]+)")


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _data(shape: str) -> np.ndarray:
    g = np.random.default_rng(0)
    return g.integers(0, 3, SHAPES[shape]) if shape == "i" else g.random(SHAPES[shape]) + 0.5


def _outcome(fn, args) -> tuple:
    """``("ok", None)`` or ``(exception type name, first line of its message)``; a call over 5 s is ``timeout``."""
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        fn(*args)
        return "ok", None
    except _Timeout:
        return "timeout", None
    except Exception as e:  # noqa: BLE001 - the outcome is what is surveyed
        return type(e).__name__, str(e).split("\n")[0][:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _working_call(fn) -> tuple | None:
    for shape in SHAPES:
        for pattern in PATTERNS:
            args = tuple(torch.tensor(_data(shape)) if a is T else a for a in pattern)
            if _outcome(fn, args)[0] == "ok":
                return pattern, shape
    return None


def _bad_values(shape: str) -> dict:
    data = _data(shape)
    return {"ndarray": data.copy(), "list": data.tolist(), "None": None, "str": "abc"}


def _category(theirs: tuple, ours: tuple) -> str:
    (t_kind, t_msg), (l_kind, l_msg) = theirs, ours
    if t_kind == "ok" or l_kind == "ok":
        return "ok" if t_kind == l_kind else ("tapelab accepts, torch raises" if l_kind == "ok"
                                              else "tapelab raises, torch accepts")
    if t_kind != l_kind:
        return "wrong exception type"
    expected, got = _KEY.search(t_msg or ""), _KEY.search(l_msg or "")
    if expected is None or (got is not None and got.groups() == expected.groups()):
        return "ok"
    if got is not None and got.groups()[1:] == expected.groups()[1:]:
        return "parameter name only"
    return "message"


def survey() -> list[dict]:
    rows = []
    for prefix, theirs, ours in MODULES:
        for name in sorted(dir(theirs)):
            t_fn, l_fn = getattr(theirs, name, None), getattr(ours, name, None)
            if (name.startswith(SKIP_PREFIXES) or name in SKIP or l_fn is None or not callable(t_fn)
                    or not callable(l_fn) or isinstance(t_fn, (type, types.ModuleType))):
                continue
            found = _working_call(t_fn)
            if found is None:
                continue
            pattern, shape = found
            for position in [i for i, a in enumerate(pattern[:2]) if a is T]:
                for kind in ("ndarray", "list", "None", "str"):
                    outcomes = []
                    for m, fn in ((torch, t_fn), (tapelab, l_fn)):
                        args = [m.tensor(_data(shape)) if a is T else a for a in pattern]
                        args[position] = _bad_values(shape)[kind]
                        outcomes.append(_outcome(fn, tuple(args)))
                    rows.append(dict(function=prefix + name, pattern=",".join(map(str, pattern)), shape=shape,
                                     position=position + 1, value=kind, category=_category(*outcomes),
                                     torch=outcomes[0], tapelab=outcomes[1]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print every call whose outcome differs")
    ap.add_argument("--json", help="write every call's outcomes to this file")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    rows = survey()
    differ = [r for r in rows if r["category"] != "ok"]
    print(f"functions {len({r['function'] for r in rows})}, calls {len(rows)}, "
          f"functions with a difference {len({r['function'] for r in differ})}")
    for category, n in collections.Counter(r["category"] for r in rows).most_common():
        print(f"  {category}: {n}")
    if opts.list:
        for r in differ:
            print(f"{r['function']}({r['pattern']}) position {r['position']} {r['value']}: {r['category']}\n"
                  f"    torch:   {r['torch']}\n    tapelab: {r['tapelab']}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=0)


if __name__ == "__main__":
    main()
