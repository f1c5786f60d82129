"""The floor: each bench step written by hand in numpy (float32), with no engine.

Same shapes, same arithmetic (forward, loss, backward, update) as the engine's step, with
every gradient formula written out and fused where a person would fuse it. The time of a
floor is what the step costs with no dispatch, no graph and no Tensor objects; the engine's
time minus the floor is its overhead. Each builder takes a numpy ``rng`` and returns the step.
"""
from __future__ import annotations

import numpy as np

from models import GCN, GPT, LSTM, RESNET, gcn_graph

F32 = np.float32


def _randn(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def _softmax_xent(z, y):
    """Mean cross-entropy of logits ``z`` [N, C] at labels ``y``, and its gradient."""
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    s = e.sum(1, keepdims=True)
    n = len(y)
    loss = float(np.log(s[:, 0]).mean() - z[np.arange(n), y].mean())
    g = e / s
    g[np.arange(n), y] -= 1
    g /= n
    return loss, g


# ------------------------------------------------------------------ chain
def chain(rng, backward: bool = True):
    x, w = _randn(rng, 16), _randn(rng, 16)

    def step():
        b = np.tanh(x * w + 1)
        c = b * x
        s = 1 / (1 + np.exp(-c))
        out = s.sum()
        if backward:
            gc = s * (1 - s)
            ga = gc * x * (1 - b * b)
            gx = gc * b + ga * w
            gw = ga * x
            return out, gx, gw
        return out
    return step


# ------------------------------------------------------------------ matmul
def matmul(rng, n: int = 1024):
    """``(a @ b).sum()`` and its gradients: numpy's own three GEMMs (the gradient of a sum is a
    matrix of ones)."""
    a, b = _randn(rng, n, n), _randn(rng, n, n)

    def step():
        out = (a @ b).sum()
        g = np.ones((n, n), F32)
        return out, g @ b.T, a.T @ g
    return step


# ------------------------------------------------------------------ MLP
def mlp(rng, batch: int, sizes=(784, 512, 512, 10), lr=0.01):
    x = _randn(rng, batch, sizes[0])
    y = rng.integers(0, sizes[-1], batch)
    ws = [(_randn(rng, o, i, scale=i ** -0.5), _randn(rng, o, scale=0.01)) for i, o in zip(sizes[:-1], sizes[1:])]

    def step():
        acts, h = [x], x
        for i, (w, b) in enumerate(ws):
            h = h @ w.T + b
            if i < len(ws) - 1:
                np.maximum(h, 0, out=h)
            acts.append(h)
        loss, g = _softmax_xent(h, y)
        for i in range(len(ws) - 1, -1, -1):
            w, b = ws[i]
            gw, gb = g.T @ acts[i], g.sum(0)
            if i:
                g = (g @ w) * (acts[i] > 0)
            w -= lr * gw
            b -= lr * gb
        return loss
    return step


# ------------------------------------------------------------------ AdamW on arrays
class _AdamW:
    def __init__(self, groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8):
        self.groups, self.lr, self.betas, self.eps, self.t = groups, lr, betas, eps, 0
        self.m = [[np.zeros_like(p) for p in ps] for ps, _ in groups]
        self.v = [[np.zeros_like(p) for p in ps] for ps, _ in groups]

    def step(self, grads):
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.t, (1 - b2 ** self.t) ** 0.5
        it = iter(grads)
        for (ps, wd), ms, vs in zip(self.groups, self.m, self.v):
            for p, m, v in zip(ps, ms, vs):
                g = next(it)
                if wd:
                    p *= 1 - self.lr * wd
                m += (1 - b1) * (g - m)
                v *= b2
                v += (1 - b2) * g * g
                p -= (self.lr / c1) * m / (np.sqrt(v) / c2 + self.eps)


# ------------------------------------------------------------------ GPT block
def _ln(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xh = xc * rstd
    return xh * g + b, (xh, rstd)


def _ln_back(gy, g, cache):
    xh, rstd = cache
    gxh = gy * g
    gx = rstd * (gxh - gxh.mean(-1, keepdims=True) - xh * (gxh * xh).mean(-1, keepdims=True))
    return gx, (gy * xh).reshape(-1, xh.shape[-1]).sum(0), gy.reshape(-1, gy.shape[-1]).sum(0)


def gpt(rng, d: int):
    from scipy.special import erf   # exact GELU, as F.gelu's default; scipy only where a floor needs it
    cfg = GPT[d]
    nh, T, B, V = cfg["heads"], cfg["seq"], cfg["batch"], cfg["vocab"]
    hd = d // nh
    p = dict(wte=_randn(rng, V, d, scale=0.02), wpe=_randn(rng, T, d, scale=0.02),
             attn_w=_randn(rng, 3 * d, d, scale=0.02), proj_w=_randn(rng, d, d, scale=0.02),
             fc_w=_randn(rng, 4 * d, d, scale=0.02), fc2_w=_randn(rng, d, 4 * d, scale=0.02),
             head_w=_randn(rng, V, d, scale=0.02),
             ln1_g=np.ones(d, F32), ln1_b=np.zeros(d, F32), ln2_g=np.ones(d, F32), ln2_b=np.zeros(d, F32),
             lnf_g=np.ones(d, F32), lnf_b=np.zeros(d, F32), attn_b=np.zeros(3 * d, F32),
             proj_b=np.zeros(d, F32), fc_b=np.zeros(4 * d, F32), fc2_b=np.zeros(d, F32))
    decay = [k for k in p if p[k].ndim == 2]
    nodecay = [k for k in p if p[k].ndim < 2]
    opt = _AdamW([([p[k] for k in decay], 0.1), ([p[k] for k in nodecay], 0.0)])
    data = rng.integers(0, V, (B, T + 1))
    idx, tgt = data[:, :-1], data[:, 1:].reshape(-1)
    mask = np.triu(np.ones((T, T), bool), 1)
    onehot = np.eye(V, dtype=F32)[idx.reshape(-1)]
    scale = hd ** -0.5

    def step():
        x0 = p["wte"][idx] + p["wpe"]
        h1, c1 = _ln(x0, p["ln1_g"], p["ln1_b"])
        qkv = h1 @ p["attn_w"].T + p["attn_b"]
        q, k, v = (z.reshape(B, T, nh, hd).transpose(0, 2, 1, 3) for z in np.split(qkv, 3, axis=2))
        att = (q @ k.transpose(0, 1, 3, 2)) * scale
        att[..., mask] = -np.inf
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
        x1 = x0 + y @ p["proj_w"].T + p["proj_b"]
        h2, c2 = _ln(x1, p["ln2_g"], p["ln2_b"])
        f = h2 @ p["fc_w"].T + p["fc_b"]
        cdf = 0.5 * (1 + erf(f * F32(0.5 ** 0.5)))
        gl = f * cdf
        x2 = x1 + gl @ p["fc2_w"].T + p["fc2_b"]
        hf, cf = _ln(x2, p["lnf_g"], p["lnf_b"])
        logits = hf.reshape(-1, d) @ p["head_w"].T
        loss, g = _softmax_xent(logits, tgt)
        gr = {}
        gr["head_w"] = g.T @ hf.reshape(-1, d)
        gx2, gr["lnf_g"], gr["lnf_b"] = _ln_back((g @ p["head_w"]).reshape(B, T, d), p["lnf_g"], cf)
        g2 = gx2.reshape(-1, d)
        gr["fc2_w"], gr["fc2_b"] = g2.T @ gl.reshape(-1, 4 * d), g2.sum(0)
        gf = (g2 @ p["fc2_w"]).reshape(B, T, 4 * d) * (cdf + f * np.exp(-0.5 * f * f) * F32((2 * np.pi) ** -0.5))
        gf2 = gf.reshape(-1, 4 * d)
        gr["fc_w"], gr["fc_b"] = gf2.T @ h2.reshape(-1, d), gf2.sum(0)
        gx1h, gr["ln2_g"], gr["ln2_b"] = _ln_back((gf2 @ p["fc_w"]).reshape(B, T, d), p["ln2_g"], c2)
        gx1 = gx2 + gx1h
        g1 = gx1.reshape(-1, d)
        gr["proj_w"], gr["proj_b"] = g1.T @ y.reshape(-1, d), g1.sum(0)
        gy = (g1 @ p["proj_w"]).reshape(B, T, nh, hd).transpose(0, 2, 1, 3)
        gv = att.transpose(0, 1, 3, 2) @ gy
        ga = gy @ v.transpose(0, 1, 3, 2)
        ga = att * (ga - (ga * att).sum(-1, keepdims=True)) * scale
        gq, gk = ga @ k, ga.transpose(0, 1, 3, 2) @ q
        gqkv = np.concatenate([z.transpose(0, 2, 1, 3).reshape(-1, d) for z in (gq, gk, gv)], axis=1)
        gr["attn_w"], gr["attn_b"] = gqkv.T @ h1.reshape(-1, d), gqkv.sum(0)
        gx0h, gr["ln1_g"], gr["ln1_b"] = _ln_back((gqkv @ p["attn_w"]).reshape(B, T, d), p["ln1_g"], c1)
        gx0 = (gx1 + gx0h).reshape(-1, d)
        gr["wte"], gr["wpe"] = onehot.T @ gx0, gx0.reshape(B, T, d).sum(0)
        opt.step([gr[k] for k in decay] + [gr[k] for k in nodecay])
        return loss
    return step


# ------------------------------------------------------------------ 2-layer LSTM LM
def lstm(rng):
    c = LSTM
    V, E, H, L, T, B = c["vocab"], c["emb"], c["hidden"], c["layers"], c["bptt"], c["batch"]
    enc = _randn(rng, V, E, scale=0.1)
    layers = [(_randn(rng, 4 * H, E if i == 0 else H, scale=H ** -0.5), _randn(rng, 4 * H, H, scale=H ** -0.5),
               np.zeros(4 * H, F32)) for i in range(L)]
    dec_w, dec_b = _randn(rng, V, H, scale=0.1), np.zeros(V, F32)
    params = [enc] + [a for lay in layers for a in lay] + [dec_w, dec_b]
    stream = rng.integers(0, V, (T + 1, B))
    x, y = stream[:-1], stream[1:].reshape(-1)
    onehot = np.eye(V, dtype=F32)[x.reshape(-1)]
    state = [(np.zeros((B, H), F32), np.zeros((B, H), F32)) for _ in range(L)]

    def sig(z):
        return 1 / (1 + np.exp(-z))

    def step():
        inp = enc[x]
        caches = []
        for li, (wih, whh, b) in enumerate(layers):
            h, cs = state[li]
            xw = (inp.reshape(-1, inp.shape[-1]) @ wih.T + b).reshape(T, B, 4 * H)
            out = np.empty((T, B, H), F32)
            cache = []
            for t in range(T):
                gates = xw[t] + h @ whh.T
                i, f, g, o = sig(gates[:, :H]), sig(gates[:, H:2 * H]), np.tanh(gates[:, 2 * H:3 * H]), sig(gates[:, 3 * H:])
                c_prev, h_prev = cs, h
                cs = f * cs + i * g
                tc = np.tanh(cs)
                h = o * tc
                out[t] = h
                cache.append((i, f, g, o, c_prev, h_prev, tc))
            state[li] = (h, cs)
            caches.append((inp, cache))
            inp = out
        logits = inp.reshape(-1, H) @ dec_w.T + dec_b
        loss, gz = _softmax_xent(logits, y)
        grads = [None] * len(params)
        grads[-2], grads[-1] = gz.T @ inp.reshape(-1, H), gz.sum(0)
        gout = (gz @ dec_w).reshape(T, B, H)
        for li in range(L - 1, -1, -1):
            wih, whh, b = layers[li]
            lin, cache = caches[li]
            gwhh = np.zeros_like(whh)
            ggates = np.empty((T, B, 4 * H), F32)
            gh = np.zeros((B, H), F32)
            gc = np.zeros((B, H), F32)
            for t in range(T - 1, -1, -1):
                i, f, g, o, c_prev, h_prev, tc = cache[t]
                gh = gh + gout[t]
                go = gh * tc
                gc = gc + gh * o * (1 - tc * tc)
                gg = ggates[t]
                gg[:, :H] = gc * g * i * (1 - i)
                gg[:, H:2 * H] = gc * c_prev * f * (1 - f)
                gg[:, 2 * H:3 * H] = gc * i * (1 - g * g)
                gg[:, 3 * H:] = go * o * (1 - o)
                gwhh += gg.T @ h_prev
                gh = gg @ whh
                gc = gc * f
            g2 = ggates.reshape(-1, 4 * H)
            grads[1 + 3 * li:4 + 3 * li] = [g2.T @ lin.reshape(-1, lin.shape[-1]), gwhh, g2.sum(0)]
            gout = (g2 @ wih).reshape(T, B, -1)
        grads[0] = onehot.T @ gout.reshape(-1, E)
        norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
        coef = min(1.0, c["clip"] / (norm + 1e-6))
        for p_, g_ in zip(params, grads):
            p_ -= (c["lr"] * coef) * g_
        return loss
    return step


# ------------------------------------------------------------------ GCN
def gcn(rng):
    from scipy import sparse
    c = GCN
    idx, values, feats, labels = gcn_graph(rng)
    adj = sparse.csr_matrix((values, (idx[0], idx[1])), shape=(c["nodes"], c["nodes"]))
    adj_t = adj.T.tocsr()
    w1 = _randn(rng, c["features"], c["hidden"], scale=0.1)
    w2 = _randn(rng, c["hidden"], c["classes"], scale=0.1)
    ms = [np.zeros_like(w1), np.zeros_like(w2)]
    vs = [np.zeros_like(w1), np.zeros_like(w2)]
    t = [0]

    def step():
        a1 = adj @ (feats @ w1)
        h = np.maximum(a1, 0)
        loss, g = _softmax_xent(adj @ (h @ w2), labels)
        g2 = adj_t @ g
        gw2 = h.T @ g2
        gh = (g2 @ w2.T) * (a1 > 0)
        gw1 = feats.T @ (adj_t @ gh)
        t[0] += 1
        for p_, g_, m_, v_ in zip((w1, w2), (gw1, gw2), ms, vs):
            g_ = g_ + 5e-4 * p_
            m_ += 0.1 * (g_ - m_)
            v_ *= 0.999
            v_ += 0.001 * g_ * g_
            p_ -= (0.01 / (1 - 0.9 ** t[0])) * m_ / (np.sqrt(v_) / (1 - 0.999 ** t[0]) ** 0.5 + 1e-8)
        return loss
    return step


# ------------------------------------------------------------------ convolution rows (NHWC throughout)
def _cols(x, pad):
    """3x3 im2col of ``x (N, H, W, C)`` padded by ``pad``: ``(N*H*W, 9*C)`` rows, taps then channels."""
    n, h, w, c = x.shape
    p = np.zeros((n, h + 2 * pad, w + 2 * pad, c), F32)
    p[:, pad:pad + h, pad:pad + w] = x
    win = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(1, 2))      # (N, H, W, C, 3, 3)
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * w, 9 * c)


def _conv(x, wm):
    """Same-size 3x3 convolution of ``x (N, H, W, C)`` with ``wm (9*C, O)``: cols for the backward too."""
    cols = _cols(x, 1)
    return (cols @ wm).reshape(x.shape[:3] + (wm.shape[1],)), cols


def _conv_back(gy, cols, wm, need_gx: bool):
    """Weight gradient ``cols^T gy`` and, when asked, the input gradient: the convolution of gy with
    the flipped, transposed kernel (stride 1)."""
    o = wm.shape[1]
    gw = cols.T @ gy.reshape(-1, o)
    if not need_gx:
        return gw, None
    c = wm.shape[0] // 9
    flipped = wm.reshape(3, 3, c, o)[::-1, ::-1].transpose(0, 1, 3, 2).reshape(9 * o, c)
    return gw, _conv(gy, flipped)[0]


def _bn(x, g, b, eps=1e-5):
    """Train-mode batch norm over all but the last (channel) dim."""
    m = x.reshape(-1, x.shape[-1])
    mean = m.mean(0)
    xc = x - mean
    rstd = 1 / np.sqrt((xc * xc).reshape(-1, x.shape[-1]).mean(0) + F32(eps))
    xh = xc * rstd
    return xh * g + b, (xh, rstd)


def _bn_back(gy, g, cache):
    xh, rstd = cache
    c = gy.shape[-1]
    gb = gy.reshape(-1, c).sum(0)
    gg = (gy * xh).reshape(-1, c).sum(0)
    m = gy.size // c
    return (gy - gb / m - xh * (gg / m)) * (rstd * g), gg, gb


def _sgd(params, grads, bufs, lr, momentum=0.9, wd=0.0):
    for p, g, b in zip(params, grads, bufs):
        if wd:
            g = g + wd * p
        b *= momentum
        b += g
        p -= lr * b


def _wm(rng, c, o):
    return _randn(rng, 9 * c, o, scale=(9 * c) ** -0.5)


def cnn(rng):
    """The CNN row: conv(1->16)-BN-ReLU-maxpool, conv(16->32)-BN-ReLU-maxpool, linear, cross-entropy,
    SGD momentum; batch 32 of 28x28."""
    x = _randn(rng, 32, 28, 28, 1)
    y = rng.integers(0, 10, 32)
    ps = [_wm(rng, 1, 16), np.zeros(16, F32), np.ones(16, F32), np.zeros(16, F32),
          _wm(rng, 16, 32), np.zeros(32, F32), np.ones(32, F32), np.zeros(32, F32),
          _randn(rng, 32 * 7 * 7, 10, scale=(32 * 7 * 7) ** -0.5), np.zeros(10, F32)]
    bufs = [np.zeros_like(p) for p in ps]

    def pool(a):
        n, h, w, c = a.shape
        out = a.reshape(n, h // 2, 2, w // 2, 2, c).max((2, 4))
        return out, a == np.repeat(np.repeat(out, 2, 1), 2, 2)

    def unpool(g, mask):
        return np.repeat(np.repeat(g, 2, 1), 2, 2) * mask

    def step():
        w1, b1, g1, be1, w2, b2, g2, be2, wl, bl = ps
        z1, c1 = _conv(x, w1)
        a1, n1 = _bn(z1 + b1, g1, be1)
        r1 = np.maximum(a1, 0)
        p1, m1 = pool(r1)
        z2, c2 = _conv(p1, w2)
        a2, n2 = _bn(z2 + b2, g2, be2)
        r2 = np.maximum(a2, 0)
        p2, m2 = pool(r2)
        flat = p2.reshape(32, -1)
        loss, gz = _softmax_xent(flat @ wl + bl, y)
        gwl, gbl = flat.T @ gz, gz.sum(0)
        gr2 = unpool((gz @ wl.T).reshape(p2.shape), m2) * (a2 > 0)
        gz2, gg2, gbe2 = _bn_back(gr2, g2, n2)
        gw2, gp1 = _conv_back(gz2, c2, w2, True)
        gr1 = unpool(gp1, m1) * (a1 > 0)
        gz1, gg1, gbe1 = _bn_back(gr1, g1, n1)
        gw1, _ = _conv_back(gz1, c1, w1, False)
        grads = [gw1, gz1.reshape(-1, 16).sum(0), gg1, gbe1, gw2, gz2.reshape(-1, 32).sum(0), gg2, gbe2, gwl, gbl]
        _sgd(ps, grads, bufs, 0.01)
        return loss
    return step


def resnet(rng):
    """The ResNet row: stem conv(3->32)-BN-ReLU, two basic blocks (conv-BN-ReLU-conv-BN, identity
    shortcut, ReLU), global average pool, linear, cross-entropy; SGD momentum, weight decay."""
    c = RESNET
    n, ch, s = c["batch"], c["channels"], c["size"]
    x = _randn(rng, n, s, s, 3)
    y = rng.integers(0, c["classes"], n)
    convs = [_wm(rng, 3, ch)] + [_wm(rng, ch, ch) for _ in range(4)]
    norms = [(np.ones(ch, F32), np.zeros(ch, F32)) for _ in range(5)]
    head = [_randn(rng, ch, c["classes"], scale=ch ** -0.5), np.zeros(c["classes"], F32)]
    ps = convs + [t for gb in norms for t in gb] + head
    bufs = [np.zeros_like(p) for p in ps]

    def step():
        saved = []                                   # per conv: (cols, bn cache, pre-ReLU output)

        def conv_bn(h, i, skip=None):
            z, cols = _conv(h, convs[i])
            a, cache = _bn(z, *norms[i])
            if skip is not None:
                a = a + skip
            saved.append((cols, cache, a))
            return np.maximum(a, 0)

        h = conv_bn(x, 0)
        for blk in range(2):
            h = conv_bn(conv_bn(h, 1 + 2 * blk), 2 + 2 * blk, skip=h)
        pooled = h.mean((1, 2))
        loss, gz = _softmax_xent(pooled @ head[0] + head[1], y)
        gh, gb = pooled.T @ gz, gz.sum(0)
        g = np.broadcast_to((gz @ head[0].T)[:, None, None, :] / (s * s), h.shape)
        gconv, gnorm = [None] * 5, [None] * 5

        def back(g, i, need_gx=True):
            cols, cache, a = saved[i]
            g = g * (a > 0)
            gz_, gg_, gb_ = _bn_back(g, norms[i][0], cache)
            gnorm[i] = (gg_, gb_)
            gconv[i], gx = _conv_back(gz_, cols, convs[i], need_gx)
            return g, gx                                 # g: the gradient at the block's sum (the skip's)

        for blk in (1, 0):
            gskip, gmid = back(g, 2 + 2 * blk)
            g = gskip + back(gmid, 1 + 2 * blk)[1]
        back(g, 0, need_gx=False)
        grads = gconv + [t for gb_ in gnorm for t in gb_] + [gh, gb]
        _sgd(ps, grads, bufs, 0.05, wd=5e-4)
        return loss
    return step
