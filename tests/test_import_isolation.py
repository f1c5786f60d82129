"""The engine must import and train with every notebook package blocked (engine/ never calls up)."""
import subprocess
import sys
import textwrap

BLOCKED = ("IPython", "ipywidgets", "anywidget", "traitlets", "matplotlib")

SCRIPT = textwrap.dedent(f"""
    import sys

    BLOCKED = {BLOCKED!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is blocked: the engine must not import it")
            return None

    sys.meta_path.insert(0, Blocker())
    for name in list(sys.modules):
        if name.split(".")[0] in BLOCKED:
            del sys.modules[name]

    import tapelab as torch
    import tapelab.utils.checkpoint

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    with torch.tape() as t:
        loss = (torch.tanh(x @ w) * 2).sum()
        loss.backward()
    assert len(t) > 3
    assert x.grad is not None and w.grad is not None
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not leaked, leaked
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("blocked-ok")
    print("grad", [round(v, 6) for v in w.grad.tolist()])
""")


def test_engine_imports_and_runs_with_notebook_packages_blocked():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "blocked-ok" in proc.stdout
    # d/dw sum(2 tanh(x @ w)) = 2 * (1 - tanh^2(x @ w)) @ x
    import numpy as np
    xw = np.array([[1.0, 2.0], [3.0, 4.0]]) @ np.array([0.5, -1.0])
    want = (2 * (1 - np.tanh(xw) ** 2)) @ np.array([[1.0, 2.0], [3.0, 4.0]])
    got = eval(proc.stdout.split("grad", 1)[1])
    np.testing.assert_allclose(got, want, rtol=1e-5)
