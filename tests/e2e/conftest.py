"""One JupyterLab server and one headless Chromium (Debian's, driven by Python Playwright) for the
whole session. Skipped, with the reason, when /usr/bin/chromium or playwright is missing."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
OUT = ROOT / "test-output" / "e2e"


def _skip_reason() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is absent (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "python playwright is not installed (pip install playwright; no browser download needed)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "jupyterlab is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def lab_url(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    root.mkdir()
    shutil.copy(ROOT / "tutorials" / "01_tensors_autograd_tape.ipynb", root)
    settings = tmp / "settings"
    for rel, data in {"@jupyterlab/apputils-extension/sessionDialogs.jupyterlab-settings": {"autoStartDefaultKernel": True},
                      "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
                          {"fetchNews": "false", "checkForUpdates": False}}.items():
        p = settings / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         "--ServerApp.allow_root=True", "--IdentityProvider.token=", "--ServerApp.password=",
         "--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         f"--ServerApp.root_dir={root}", f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
         f"--LabApp.user_settings_dir={settings}"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/api/status", timeout=2)
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("jupyter lab did not start:\n" + (tmp / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def browser(lab_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                    "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            yield b
        finally:
            b.close()


def _fresh_lab(lab_url: str) -> None:
    """Each test starts from a clean JupyterLab: no workspace to restore (else the notebooks of
    earlier tests reopen, and one of them can be the current widget when "run all" fires) and
    no kernels left running from earlier tests."""
    import urllib.error
    import urllib.request
    def delete(url):
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=10)
        except urllib.error.HTTPError:
            pass   # gone already, or no workspace saved yet

    for s in json.load(urllib.request.urlopen(f"{lab_url}/api/sessions", timeout=10)):
        delete(f"{lab_url}/api/sessions/{s['id']}")
    delete(f"{lab_url}/lab/api/workspaces/default")


@pytest.fixture
def page(browser, lab_url):
    _fresh_lab(lab_url)
    ctx = browser.new_context(viewport={"width": 1500, "height": 950})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    errors: list = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    try:
        yield pg
    finally:
        ctx.close()


@pytest.fixture(scope="session")
def out_dir():
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT
