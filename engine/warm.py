"""``python -m tapelab.warm``: compile the eager kernels a first training step needs, before it.

numba compiles each kernel once per signature (argument types, array layouts included) and keeps it
in its disk cache, so in a fresh install the first step of a small model waits for those compiles:
18 s for an MLP under load, minutes for larger models (bench/README.md, issue 17, session 33).
This runs one forward, backward and optimizer step of a small model of each kind at one thread and, on a
machine with two cores or more, at two (the parallel kernels are other functions), so the kernels
and layouts those steps use are compiled and cached. ``scripts/lab`` starts it in the background.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

MODELS = ("mlp", "cnn", "transformer", "lstm", "gpt", "resnet")


def _step(name: str) -> None:
    """One forward and backward of the small model ``name``, its gradients clipped, then an AdamW step and
    an SGD step with momentum and weight decay (the optimizers the tutorials and bench rows use)."""
    import tapelab as torch
    nn = torch.nn
    torch.manual_seed(0)
    model, x, y = _models(torch)[name]()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4).step()


def _models(torch) -> dict[str, Callable]:
    """Each model kind's builder: ``(model, inputs, targets)`` at a bench row's scale."""
    nn = torch.nn

    def mlp():
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
        return model, torch.randn(64, 256), torch.randint(0, 10, (64,))

    def cnn():
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
        return model, torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    class Causal(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 128)
            self.block = nn.TransformerEncoderLayer(128, 4, 512, batch_first=True, norm_first=True)
            self.head = nn.Linear(128, 100)

        def forward(self, tokens):
            mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
            return self.head(self.block(self.emb(tokens), src_mask=mask, is_causal=True)).reshape(-1, 100)

    def transformer():
        return Causal(), torch.randint(0, 100, (8, 64)), torch.randint(0, 100, (8 * 64,))

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(64, 128, num_layers=2, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    def lstm():
        return Recurrent(), torch.randn(16, 32, 64), torch.randint(0, 10, (16,))

    class Gpt(nn.Module):   # a pre-LN block as minGPT writes it: SDPA and GELU, which the encoder layer has not
        def __init__(self):
            super().__init__()
            self.emb, self.ln1, self.ln2 = nn.Embedding(100, 128), nn.LayerNorm(128), nn.LayerNorm(128)
            self.qkv, self.proj = nn.Linear(128, 3 * 128), nn.Linear(128, 128)
            self.fc, self.fc2, self.head = nn.Linear(128, 512), nn.Linear(512, 128), nn.Linear(128, 100)

        def forward(self, tokens):
            x = self.emb(tokens)
            b, t, c = x.shape
            q, k, v = (z.view(b, t, 4, c // 4).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, dim=2))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            x = x + self.fc2(nn.functional.gelu(self.fc(self.ln2(x))))
            return self.head(x).reshape(-1, 100)

    def gpt():
        return Gpt(), torch.randint(0, 100, (8, 64)), torch.randint(0, 100, (8 * 64,))

    class Residual(nn.Module):   # a ResNet basic block: the shortcut's add, and a global average pool after it
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
            self.conv2, self.bn2 = nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)

        def forward(self, x):
            return nn.functional.relu(self.bn2(self.conv2(nn.functional.relu(self.bn1(self.conv1(x))))) + x)

    def resnet():
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), Residual(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        return model, torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))

    return {"mlp": mlp, "cnn": cnn, "transformer": transformer, "lstm": lstm, "gpt": gpt, "resnet": resnet}


def warm(models: tuple[str, ...] = MODELS, threads: tuple[int, ...] | None = None) -> None:
    """Run each model's first step at each thread count, printing how long each took."""
    import tapelab as torch
    if threads is None:
        threads = (1, 2) if (os.cpu_count() or 1) >= 2 else (1,)
    for n in threads:
        torch.set_num_threads(n)
        for name in models:
            start = time.perf_counter()
            _step(name)
            print(f"tapelab.warm: {name}, {n} thread(s): {time.perf_counter() - start:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tapelab.warm", description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--threads", nargs="+", type=int, help="thread counts (default: 1, and 2 with two cores)")
    args = parser.parse_args(argv)
    warm(tuple(args.models), tuple(args.threads) if args.threads else None)


if __name__ == "__main__":
    main()
