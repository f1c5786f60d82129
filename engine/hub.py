"""``torch.hub``: load pretrained weights by URL and models from a repository's ``hubconf.py``.

The cache is PyTorch's own (``$TORCH_HOME/hub``, else ``$XDG_CACHE_HOME/torch/hub``, else
``~/.cache/torch/hub``), so weights PyTorch already downloaded load without a network, and
tapelab reads PyTorch's checkpoint files (``tapelab.load``). A repository is a local directory
(``source="local"``) or a GitHub ``owner/repo[:ref]`` fetched once as a zip into the cache.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request
from urllib.parse import urlparse  # noqa: F401  (torch.hub re-exports it; timm imports it from there)
import zipfile

from .serialization import load as _load

try:
    from tqdm import tqdm   # torch.hub re-exports it (torchio imports tqdm from there) and shows downloads with it
except ImportError:
    class tqdm:   # noqa: N801  (PyTorch's fallback name): a byte count or percentage on stderr
        def __init__(self, total=None, disable=False, unit=None, *args, **kwargs):
            self.total, self.disable, self.n = total, disable, 0

        def update(self, n) -> None:
            if not self.disable:
                self.n += n
                sys.stderr.write(f"\r{self.n:.1f} bytes" if self.total is None else f"\r{100 * self.n / self.total:.1f}%")
                sys.stderr.flush()

        def set_description(self, *args, **kwargs) -> None:
            pass

        def write(self, s) -> None:
            sys.stderr.write(f"{s}\n")

        def close(self) -> None:
            self.disable = True

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            if not self.disable:
                sys.stderr.write("\n")

__all__ = ["HASH_REGEX", "get_dir", "set_dir", "download_url_to_file", "load_state_dict_from_url", "load", "list", "help"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")   # torch.hub's name: libraries import it
_DIR: list = []


def get_dir() -> str:
    """The hub cache directory (``set_dir``'s, else PyTorch's default place)."""
    if _DIR:
        return _DIR[0]
    home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d: str | os.PathLike) -> None:
    _DIR[:] = [os.path.expanduser(os.fspath(d))]


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None, progress: bool = True) -> None:
    """``url`` into ``dst`` through a temporary file in the same folder, checking the SHA-256
    prefix when given (``RuntimeError`` and no file on a mismatch)."""
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha256()
    with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "tapelab.hub"})) as response, \
            tempfile.NamedTemporaryFile(delete=False, dir=folder) as tmp:
        size = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        with tqdm(total=int(size) if size else None, disable=not progress, unit="B", unit_scale=True,
                  unit_divisor=1024) as bar:
            while chunk := response.read(1 << 16):
                tmp.write(chunk)
                digest.update(chunk)
                bar.update(len(chunk))
    if hash_prefix is not None and not digest.hexdigest().startswith(hash_prefix):
        os.remove(tmp.name)
        raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest.hexdigest()}")')
    shutil.move(tmp.name, dst)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None, weights_only: bool = False):
    """The object saved at ``url``, downloaded once into ``model_dir`` (default
    ``get_dir()/checkpoints``); with ``check_hash`` the file name's ``-<sha256 prefix>.`` is checked."""
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, name)
    if not os.path.exists(cached):
        sys.stdout.write(f'Downloading: "{url}" to {cached}\n')   # PyTorch's line; programs print it
        match = HASH_REGEX.search(name) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress)
    return _load(cached, map_location=map_location, weights_only=weights_only)


def _repo_dir(repo_or_dir: str, source: str, force_reload: bool) -> str:
    if source == "local":
        return repo_or_dir
    if source != "github":
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    repo, _, ref = repo_or_dir.partition(":")
    owner, name = repo.split("/")
    ref = ref or "main"
    target = os.path.join(get_dir(), f"{owner}_{name}_{ref.replace('/', '_')}")
    if force_reload or not os.path.isdir(target):
        archive = target + ".zip"
        download_url_to_file(f"https://github.com/{owner}/{name}/zipball/{ref}", archive)
        with zipfile.ZipFile(archive) as z:
            top = z.namelist()[0].split("/")[0]
            z.extractall(get_dir())
        os.remove(archive)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(os.path.join(get_dir(), top), target)
    return target


def _hubconf(repo_dir: str):
    path = os.path.join(repo_dir, "hubconf.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"Cannot find hubconf.py in {repo_dir}")
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location("hubconf", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    return module


def _entry(module, model: str):
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def load(repo_or_dir: str, model: str, *args, source: str = "github", trust_repo=None, force_reload: bool = False,
         verbose: bool = True, skip_validation: bool = False, **kwargs):
    """``hubconf.<model>(*args, **kwargs)`` of a local directory or a GitHub repository."""
    return _entry(_hubconf(_repo_dir(repo_or_dir, source, force_reload)), model)(*args, **kwargs)


def list(github: str, force_reload: bool = False, skip_validation: bool = False, trust_repo=None,  # noqa: A001
         verbose: bool = True, source: str = "github"):
    """The entry points (public callables) a repository's ``hubconf.py`` offers."""
    module = _hubconf(_repo_dir(github, source, force_reload))
    return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo=None, source: str = "github") -> str:
    """The docstring of one entry point."""
    return _entry(_hubconf(_repo_dir(github, source, force_reload)), model).__doc__
