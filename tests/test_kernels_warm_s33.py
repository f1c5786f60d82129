"""``python -m tapelab.warm`` compiles the eager kernels a first step needs into numba's disk
cache: a later process's same step then loads every kernel and compiles none."""
import os
import subprocess
import sys

# one MLP step in a fresh process; prints the cache's hits and misses over tapelab's numba kernels
SECOND_PROCESS = """
import sys
from numba.core.dispatcher import Dispatcher
from tapelab import warm
warm.warm(("mlp",), (1,))
kernels = [v for name, m in list(sys.modules.items()) if name.startswith("tapelab") and m is not None
           for v in vars(m).values() if isinstance(v, Dispatcher)]
stats = [k.stats for k in kernels if k.stats.cache_path]
print("hits", sum(sum(s.cache_hits.values()) for s in stats), "misses", sum(sum(s.cache_misses.values()) for s in stats))
"""


def _run(args, cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_warm_fills_the_cache_a_later_first_step_loads(tmp_path, empty_cache_compiles):
    out = _run(["-m", "tapelab.warm", "--models", "mlp", "--threads", "1"], tmp_path)
    assert "tapelab.warm: mlp, 1 thread(s):" in out
    assert any(name.endswith(".nbi") for _, _, files in os.walk(tmp_path) for name in files)
    words = _run(["-c", SECOND_PROCESS], tmp_path).split()
    hits, misses = int(words[words.index("hits") + 1]), int(words[words.index("misses") + 1])
    assert hits > 0
    assert misses == 0


def test_warm_rejects_an_unknown_model(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "tapelab.warm", "--models", "vgg"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2 and "invalid choice: 'vgg'" in done.stderr
