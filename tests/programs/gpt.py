"""A small GPT trained in the style of the minimal-GPT training scripts: token and position
embeddings, pre-norm blocks with causal self-attention (``F.scaled_dot_product_attention`` with
``is_causal=True``, or the explicit masked softmax over a registered ``tril`` buffer), a GELU MLP,
a weight-tied head, AdamW with decay / no-decay parameter groups and fused betas, warmup + cosine
LambdaLR, ``clip_grad_norm_``, an ``estimate_loss`` pass, optional autocast with a GradScaler and
``torch.compile``, checkpoint-and-resume of model, optimizer, scheduler, scaler and iteration, and
greedy generation.

With ``checkpoint=path`` the run saves after half the iterations, rebuilds everything from other
weights and resumes from the file: its numbers must equal an uninterrupted run's."""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ._common import seed_weights

VOCAB, BLOCK, BATCH = 12, 8, 4


def make_stream(n: int, rng) -> np.ndarray:
    """Repeating words over a 12-token alphabet: something a tiny model can start to learn."""
    words = [rng.integers(1, VOCAB, size=int(rng.integers(2, 5))) for _ in range(6)]
    out = []
    while len(out) < n:
        out.extend(words[int(rng.integers(len(words)))].tolist() + [0])
    return np.asarray(out[:n], dtype=np.int64)


def main(torch, steps: int = 6, attention: str = "sdpa", checkpoint: str | None = None,
         amp: bool = False, compile: bool = False):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head, block_size):
            super().__init__()
            assert n_embd % n_head == 0
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.n_head, self.n_embd = n_head, n_embd
            self.flash = attention == "sdpa" and hasattr(torch.nn.functional, "scaled_dot_product_attention")
            if not self.flash:
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                                                     is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head, block_size):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head, block_size)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
            super().__init__()
            self.block_size = block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            ))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight      # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def get_num_params(self):
            return sum(p.numel() for p in self.parameters())

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= self.block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                            {"params": nodecay_params, "weight_decay": 0.0}]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                logits, _ = self(idx_cond)
                idx_next = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    warmup, max_iters = 2, steps

    def lr_lambda(it):
        if it < warmup:
            return (it + 1) / (warmup + 1)
        ratio = (it - warmup) / max(1, max_iters - warmup)
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * min(ratio, 1.0)))

    def build(seed):
        model = GPT(VOCAB, BLOCK, n_layer=2, n_head=2, n_embd=16)
        seed_weights(torch, model, seed=seed)
        optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
        return model, optimizer, scheduler

    rng = np.random.default_rng(8)
    data = make_stream(600, rng)
    train_data, val_data = data[:480], data[480:]
    starts = rng.integers(0, len(train_data) - BLOCK - 1, size=(steps, BATCH))

    def get_batch(split, ix):
        d = train_data if split == "train" else val_data
        x = torch.stack([torch.from_numpy(d[i:i + BLOCK]) for i in ix])
        y = torch.stack([torch.from_numpy(d[i + 1:i + 1 + BLOCK]) for i in ix])
        return x, y

    ctx = torch.autocast(device_type="cpu", dtype=torch.bfloat16) if amp else contextlib.nullcontext()

    @torch.no_grad()
    def estimate_loss(model):
        model.eval()
        out = {}
        for split in ("train", "val"):
            x, y = get_batch(split, [0, 17, 33, 64])
            with ctx:
                _, loss = model(x, y)
            out[split] = loss.item()
        model.train()
        return out

    model, optimizer, scheduler = build(seed=4)
    raw_model = model
    scaler = torch.amp.GradScaler("cpu", enabled=amp)     # a no-op unless amp (as nanoGPT-style scripts do)
    if compile:
        model = torch.compile(model)

    history = [raw_model.get_num_params()]
    iter_num = 0
    while iter_num < max_iters:
        if checkpoint is not None and iter_num == max_iters // 2:
            torch.save({"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), "iter_num": iter_num,
                        "config": {"vocab_size": VOCAB, "block_size": BLOCK}}, checkpoint)
            model, optimizer, scheduler = build(seed=40)          # a new process would start here
            raw_model = model
            ckpt = torch.load(checkpoint, map_location="cpu")
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            scaler = torch.amp.GradScaler("cpu", enabled=amp)
            scaler.load_state_dict(ckpt["scaler"])
            iter_num = ckpt["iter_num"]

        x, y = get_batch("train", starts[iter_num])
        with ctx:
            logits, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        history += [loss.item(), norm.item(), optimizer.param_groups[0]["lr"]]
        iter_num += 1

    losses = estimate_loss(model)
    history += [losses["train"], losses["val"]]
    prompt = torch.from_numpy(val_data[None, :3])
    history += raw_model.generate(prompt, max_new_tokens=5)[0].tolist()
    return history
