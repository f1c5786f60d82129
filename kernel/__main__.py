"""``python -m tapelab.kernel install [--user | --sys-prefix | --prefix DIR] [--name NAME]``:
install the "Python 3 (tapelab)" kernelspec, an ipykernel that loads tapelab.kernel at start."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

NAME = "tapelab"
DISPLAY = "Python 3 (tapelab)"


def spec(python: str = sys.executable) -> dict:
    return {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--ext=tapelab.kernel"],
            "display_name": DISPLAY, "language": "python", "metadata": {"debugger": True}}


def install(user: bool = False, prefix: str | None = None, name: str = NAME) -> str:
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "kernel.json"), "w") as f:
            json.dump(spec(), f, indent=1)
        return KernelSpecManager().install_kernel_spec(d, name, user=user, prefix=prefix)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tapelab.kernel", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install", help="install the kernelspec")
    where = i.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into the user's Jupyter data dir")
    where.add_argument("--sys-prefix", action="store_true", help="into sys.prefix (the default in a venv)")
    where.add_argument("--prefix", help="into this prefix")
    i.add_argument("--name", default=NAME)
    a = p.parse_args(argv)
    prefix = a.prefix
    if not a.user and prefix is None and (a.sys_prefix or sys.prefix != sys.base_prefix):
        prefix = sys.prefix
    path = install(user=a.user or prefix is None, prefix=prefix, name=a.name)
    print(f"installed kernelspec {a.name!r} ({DISPLAY}) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
