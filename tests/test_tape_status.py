"""``%tape status`` says the panel is connected while messages go out to it (a comm is open and
the panel has spoken, or it was opened moments ago), as ``Bridge.send`` decides."""
from __future__ import annotations

import types

import pytest

pytest.importorskip("IPython")
from tapelab.kernel.magics import TapeMagics  # noqa: E402


@pytest.mark.parametrize("listening, confirmed, says", [
    (True, True, "panel connected;"),
    (True, False, "panel connected (it has not answered yet);"),
    (False, False, "panel not connected;"),
])
def test_status(capsys, listening, confirmed, says):
    bridge = types.SimpleNamespace(recording=True, listening=listening, confirmed=confirmed, sent=7)
    TapeMagics(None, bridge).tape("status")
    assert capsys.readouterr().out.strip() == f"tape streaming on; {says} 7 messages sent"


def test_status_follows_the_bridge():
    from tapelab.kernel.bridge import Bridge

    class Comm:
        def send(self, data):
            pass

        def on_msg(self, fn):
            pass

        def on_close(self, fn):
            pass
    b = Bridge(shell=None)
    b._adopt(Comm(), listening=False)          # the kernel opened the comm: provisional
    assert b.listening and not b.confirmed and b.send({"type": "state"})
    b._on_msg({"content": {"data": {"type": "hello"}}})   # the panel spoke
    assert b.listening and b.confirmed
