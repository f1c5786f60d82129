"""Issue 16, defect 7: every panel -> kernel comm message is validated against the bridge's schema.

Unit tests drive ``Bridge._on_msg`` with a fake comm (no kernel); one test drives a real
ipykernel with the harness of ``test_kernel.py`` and sends the malformed messages over the wire.
"""
from __future__ import annotations

import logging
import types
import uuid

import pytest

from tapelab.kernel import bridge as bridge_mod
from tapelab.kernel.bridge import Bridge, validate


class FakeComm:
    def __init__(self):
        self.sent = []

    def send(self, data):
        self.sent.append(data)


@pytest.fixture
def bridge():
    shell = types.SimpleNamespace(user_ns={"_tape": object()}, events=None)
    b = Bridge(shell)
    b.comm = FakeComm()
    b.confirmed = True
    return b


def _msg(data):
    return {"content": {"data": data}}


def test_valid_messages_act(bridge):
    bridge._on_msg(_msg({"type": "set", "recording": True}))
    assert bridge.recording is True
    bridge._on_msg(_msg({"type": "set", "recording": False, "extra": "ignored"}))
    assert bridge.recording is False
    bridge._on_msg(_msg({"type": "clear"}))
    assert "_tape" not in bridge.shell.user_ns
    bridge._on_msg(_msg({"type": "hello"}))
    assert bridge.comm.sent == [{"type": "state", "recording": True}, {"type": "state", "recording": False},
                                {"type": "clear"}, {"type": "hello", "recording": False}]


@pytest.mark.parametrize("data, problem", [
    ({"type": "set", "recording": "no"}, "field 'recording' must be bool, got str"),
    ({"type": "set", "recording": 1}, "must be bool, got int"),
    ({"type": "set", "recording": None}, "must be bool, got NoneType"),
    ({"type": "set"}, "needs the field 'recording'"),
    ({"type": "launch"}, "unknown message type 'launch'"),
    ({"type": ["set"]}, "'type' must be a string"),
    ({}, "'type' must be a string"),
    ("set", "must be a JSON object, got str"),
    (["set", True], "must be a JSON object, got list"),
    (42, "must be a JSON object, got int"),
    (None, "must be a JSON object, got NoneType"),
])
def test_bad_messages_are_refused_logged_and_answered(bridge, caplog, data, problem):
    with caplog.at_level(logging.WARNING, logger=bridge_mod.__name__):
        bridge._on_msg(_msg(data))
    assert bridge.recording is False                      # "no" never turns recording on
    assert "_tape" in bridge.shell.user_ns
    assert len(bridge.comm.sent) == 1
    reply = bridge.comm.sent[0]
    assert reply["type"] == "error" and problem in reply["error"]
    assert any(problem in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("msg", [None, "x", {"content": None}, {"content": "x"}, {}, {"content": {}}])
def test_malformed_envelopes_never_raise(bridge, msg):
    bridge._on_msg(msg)
    assert bridge.comm.sent[-1]["type"] == "error"


def test_handler_failure_is_answered_not_lost(bridge, caplog):
    def boom():
        raise OSError("disk on fire")
    bridge.clear = boom
    with caplog.at_level(logging.ERROR, logger=bridge_mod.__name__):
        bridge._on_msg(_msg({"type": "clear"}))
    assert bridge.comm.sent[-1]["type"] == "error" and "disk on fire" in bridge.comm.sent[-1]["error"]
    assert any("handling 'clear' failed" in r.getMessage() for r in caplog.records)


def test_validate_accepts_the_panels_messages():
    for data in ({"type": "hello"}, {"type": "set", "recording": True}, {"type": "clear"}):
        assert validate(data) is None


# ---------------------------------------------------------------- a real kernel
def test_real_kernel_refuses_bad_messages():
    pytest.importorskip("ipykernel")
    pytest.importorskip("jupyter_client")
    pytest.importorskip("anywidget")
    from kernel_session import comm_data, run, stdout, tapelab_kernel

    with tapelab_kernel() as (km, kc):
        comm_id = uuid.uuid4().hex
        kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "tapelab",
                                                            "data": {"type": "hello"}}))
        for data in ({"type": "set", "recording": "no"}, "set", [1, 2], None, {"type": "nope"}):
            kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))
        reply, msgs = run(kc, "%tape status")
        assert reply["content"]["status"] == "ok"
        assert "streaming off" in stdout(msgs)
        errors = [d for d in comm_data(msgs, comm_id) if d.get("type") == "error"]
        assert len(errors) == 5, comm_data(msgs, comm_id)
        assert "field 'recording' must be bool" in errors[0]["error"]
        # the kernel still works and a valid message still acts
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id,
                                                          "data": {"type": "set", "recording": True}}))
        reply, msgs = run(kc, "%tape status")
        assert "streaming on" in stdout(msgs)
