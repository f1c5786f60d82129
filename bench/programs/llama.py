"""A Llama-style decoder trained for a fixed number of steps, written as today's LLM code writes it:
RMSNorm in float32 (``pow(2).mean`` and ``rsqrt``), rotary position embeddings (``rotate_half`` by
``cat``), grouped-query attention (key/value heads repeated by ``expand`` and ``reshape``) through
``scaled_dot_product_attention`` with a float additive mask (causal plus padding at ``finfo.min``, as
Hugging Face's models pass it), a SwiGLU MLP, AdamW (2 layers, d 64, 4 query / 2 key-value heads, batch
8x32, vocab 256). Small ops dominate: the step is bound by each op's fixed cost."""
import _program
import models

VOCAB, D, LAYERS, HEADS, KV_HEADS, FF, SEQ, BATCH = 256, 64, 2, 4, 2, 172, 32, 8


def llama_step(m, rng, tensor):
    """One AdamW step of the decoder on ``(idx, pad)`` (``pad[b]`` padding positions at row b's start)."""
    nn, F = m.nn, m.nn.functional
    hd = D // HEADS

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(m.ones(D))

        def forward(self, x):
            h = x.to(m.float32)
            h = h * m.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            return self.weight * h.to(x.dtype)

    def rotate_half(x):
        return m.cat((-x[..., hd // 2:], x[..., :hd // 2]), dim=-1)

    def repeat_kv(x, n):
        b, h, t, e = x.shape
        return x[:, :, None, :, :].expand(b, h, n, t, e).reshape(b, h * n, t, e)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(D, HEADS * hd, bias=False)
            self.k = nn.Linear(D, KV_HEADS * hd, bias=False)
            self.v = nn.Linear(D, KV_HEADS * hd, bias=False)
            self.o = nn.Linear(HEADS * hd, D, bias=False)

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            q = self.q(x).view(b, t, HEADS, hd).transpose(1, 2)
            k = self.k(x).view(b, t, KV_HEADS, hd).transpose(1, 2)
            v = self.v(x).view(b, t, KV_HEADS, hd).transpose(1, 2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            k, v = repeat_kv(k, HEADS // KV_HEADS), repeat_kv(v, HEADS // KV_HEADS)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.o(y.transpose(1, 2).reshape(b, t, D))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2 = RMSNorm(), Attention(), RMSNorm()
            self.gate, self.up = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False)
            self.down = nn.Linear(FF, D, bias=False)

        def forward(self, x, cos, sin, mask):
            x = x + self.attn(self.norm1(x), cos, sin, mask)
            h = self.norm2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, D)
            self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
            self.norm, self.head = RMSNorm(), nn.Linear(D, VOCAB, bias=False)
            self.register_buffer("inv_freq", 1.0 / (10000.0 ** (m.arange(0, hd, 2, dtype=m.float32) / hd)))

        def forward(self, idx, keep):
            b, t = idx.shape
            pos = m.arange(t, dtype=m.float32)
            freqs = m.outer(pos, self.inv_freq)
            emb = m.cat((freqs, freqs), dim=-1)[None].expand(b, t, hd)
            cos, sin = emb.cos(), emb.sin()
            low = m.finfo(m.float32).min
            causal = m.full((t, t), low).triu(1)
            mask = causal[None, None].expand(b, 1, t, t).clone()
            mask = mask.masked_fill(~keep[:, None, None, :].bool(), low)
            x = self.embed(idx)
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            return self.head(self.norm(x))

    model = Decoder()
    models.init_weights(m, rng, tensor, model)
    opt = m.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)

    def step(batch):
        idx, keep = (models.as_long(m, a) for a in batch)
        logits = model(idx, keep)
        labels = idx[:, 1:].masked_fill(keep[:, 1:] == 0, -100)
        return models.update(opt, F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels.reshape(-1),
                                                  ignore_index=-100))
    return step


def llama_batches(rng, n: int):
    """Random token rows, each with up to 4 padding positions at its start (left padding)."""
    import numpy as np
    for _ in range(n):
        idx = rng.integers(0, VOCAB, (BATCH, SEQ))
        pad = rng.integers(0, 5, BATCH)
        keep = (np.arange(SEQ)[None, :] >= pad[:, None]).astype(np.int64)
        yield idx, keep


if __name__ == "__main__":
    _program.run(__doc__, llama_step, llama_batches)
