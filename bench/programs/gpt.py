"""A nanoGPT-style character model trained for a fixed number of steps: random batches cut
from one token stream, embeddings, a pre-LN block with causal attention and a GELU MLP, AdamW
with two parameter groups. ``--d 128`` (4 heads, batch 16x64) or ``--d 384`` (6 heads, 8x64)."""
import sys

import _program
import models

if __name__ == "__main__":
    d = 384 if "--d" in sys.argv and sys.argv[sys.argv.index("--d") + 1] == "384" else 128
    if "--d" in sys.argv:
        del sys.argv[sys.argv.index("--d"):sys.argv.index("--d") + 2]
    _program.run(__doc__, lambda m, rng, t: models.gpt_step(m, rng, t, d),
                 lambda rng, n: models.gpt_batches(rng, d, n))
