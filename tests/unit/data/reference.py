#!/usr/bin/python3
"""reference.py - an independent implementation of docs/model.md in numpy
(float64, hand-written backward), used to make the reference dump that
tests/unit/test_trainer_reference.c checks sigma-train against.

  reference.py make [DIR]     write DIR/reference_tiny.h5 (weights, in the
                              checkpoint layout of docs/checkpoint-format.md)
                              and DIR/reference_tiny.txt (batch, expected
                              loss and gradient norm for the first steps)
  reference.py loss CKPT TOKFILE [BATCHES]
                              loss of a sigma-train checkpoint on the first
                              sequences of a token file (cross-check)

Nothing here shares code with the C trainer: only the written definition.
"""
import sys

import h5py
import numpy as np

CFG = dict(V=64, D=16, L=2, H=2, T=8, E=4, K=2, F=32)
B = 2
AUX_COEF = 0.01
OPT = dict(lr=1e-2, warmup=2, steps=10, lr_min_ratio=0.1, beta1=0.9,
           beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1.0)
NSTEPS = 3
SEED = 20261129


def tensor_names(c):
    D, E, F, V = c["D"], c["E"], c["F"], c["V"]
    out = [("tok_emb", (V, D))]
    for l in range(c["L"]):
        p = "layers.%d." % l
        out += [(p + "attn_norm", (D,)), (p + "wq", (D, D)), (p + "wk", (D, D)),
                (p + "wv", (D, D)), (p + "wo", (D, D)), (p + "moe_norm", (D,)),
                (p + "router", (D, E)), (p + "w1", (E, D, F)),
                (p + "w3", (E, D, F)), (p + "w2", (E, F, D))]
    out += [("final_norm", (D,)), ("w_out", (D, V))]
    return out


def rmsnorm(x, g):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    return x * r * g, r


def rmsnorm_back(dy, x, g, r):
    dn = dy * g
    dg = (dy * x * r).reshape(-1, x.shape[-1]).sum(0)
    dx = r * dn - r ** 3 * x * (dn * x).sum(-1, keepdims=True) / x.shape[-1]
    return dx, dg


def rope(x, sign):
    """x [B, T, H, Dh]; rotate-half, base 10000; sign -1 rotates back."""
    T, Dh = x.shape[1], x.shape[3]
    h = Dh // 2
    theta = 10000.0 ** (-2.0 * np.arange(h) / Dh)
    ang = np.arange(T)[:, None] * theta[None, :]
    c = np.cos(ang)[None, :, None, :]
    s = sign * np.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :h], x[..., h:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def silu(z):
    return z / (1.0 + np.exp(-z))


def forward_backward(W, tok, tgt, c, aux_coef, want_grad=True):
    """tok, tgt [B, T] ints. Returns loss, ce, aux, grads (dict)."""
    Bn, T = tok.shape
    D, H, E, K, L = c["D"], c["H"], c["E"], c["K"], c["L"]
    Dh = D // H
    N = Bn * T
    x = W["tok_emb"][tok.reshape(-1)]  # [N, D]
    caches = []
    auxs = []
    for l in range(L):
        p = "layers.%d." % l
        cache = {"x": x}
        a, ar = rmsnorm(x, W[p + "attn_norm"])
        q = rope((a @ W[p + "wq"]).reshape(Bn, T, H, Dh), 1)
        k = rope((a @ W[p + "wk"]).reshape(Bn, T, H, Dh), 1)
        v = (a @ W[p + "wv"]).reshape(Bn, T, H, Dh)
        qh, kh, vh = (t.transpose(0, 2, 1, 3) for t in (q, k, v))  # B,H,T,Dh
        s = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(Dh)
        mask = np.triu(np.ones((T, T), bool), 1)
        s = np.where(mask, -np.inf, s)
        P = softmax(s)
        o = (P @ vh).transpose(0, 2, 1, 3).reshape(N, D)
        xm = x + o @ W[p + "wo"]
        m, mr = rmsnorm(xm, W[p + "moe_norm"])
        pr = softmax(m @ W[p + "router"])
        idx = np.argsort(-pr, axis=1, kind="stable")[:, :K]
        pk = np.take_along_axis(pr, idx, 1)
        ssum = pk.sum(1, keepdims=True)
        gate = pk / ssum
        counts = np.bincount(idx.reshape(-1), minlength=E)
        f = counts / (N * K)
        auxs.append(E * np.sum(f * pr.mean(0)))
        y = xm.copy()
        ex = {}
        for e in range(E):
            n_, j_ = np.nonzero(idx == e)
            me = m[n_]
            h1 = me @ W[p + "w1"][e]
            h3 = me @ W[p + "w3"][e]
            hs = silu(h1) * h3
            eo = hs @ W[p + "w2"][e]
            y[n_] += gate[n_, j_][:, None] * eo
            ex[e] = (n_, j_, me, h1, h3, hs, eo)
        cache.update(a=a, ar=ar, qh=qh, kh=kh, vh=vh, P=P, o=o, xm=xm, m=m,
                     mr=mr, pr=pr, idx=idx, gate=gate, ssum=ssum, f=f, ex=ex)
        caches.append(cache)
        x = y
    fn, fr = rmsnorm(x, W["final_norm"])
    logits = fn @ W["w_out"]
    lp = logits - logits.max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    t = tgt.reshape(-1)
    ce = -lp[np.arange(N), t].mean()
    aux = float(np.mean(auxs))
    loss = ce + aux_coef * aux
    if not want_grad:
        return loss, ce, aux, None

    G = {n: np.zeros_like(v) for n, v in W.items()}
    dlog = np.exp(lp)
    dlog[np.arange(N), t] -= 1.0
    dlog /= N
    G["w_out"] = fn.T @ dlog
    dx, G["final_norm"] = rmsnorm_back(dlog @ W["w_out"].T, x, W["final_norm"], fr)
    for l in reversed(range(L)):
        p = "layers.%d." % l
        cc = caches[l]
        m, pr, idx, gate, ssum = cc["m"], cc["pr"], cc["idx"], cc["gate"], cc["ssum"]
        dm = np.zeros_like(m)
        dgate = np.zeros_like(gate)
        for e in range(E):
            n_, j_, me, h1, h3, hs, eo = cc["ex"][e]
            dy = dx[n_]
            dgate[n_, j_] = (dy * eo).sum(1)
            deo = gate[n_, j_][:, None] * dy
            G[p + "w2"][e] = hs.T @ deo
            dhs = deo @ W[p + "w2"][e].T
            sg = 1.0 / (1.0 + np.exp(-h1))
            dh1 = dhs * h3 * sg * (1.0 + h1 * (1.0 - sg))
            dh3 = dhs * silu(h1)
            G[p + "w1"][e] = me.T @ dh1
            G[p + "w3"][e] = me.T @ dh3
            np.add.at(dm, n_, dh1 @ W[p + "w1"][e].T + dh3 @ W[p + "w3"][e].T)
        dp = np.zeros_like(pr)
        dp += aux_coef / L * E * cc["f"][None, :] / N
        corr = (dgate - (dgate * gate).sum(1, keepdims=True)) / ssum
        np.add.at(dp, (np.arange(N)[:, None].repeat(K, 1), idx), corr)
        dr = pr * (dp - (pr * dp).sum(1, keepdims=True))
        G[p + "router"] = m.T @ dr
        dm += dr @ W[p + "router"].T
        dxm_n, G[p + "moe_norm"] = rmsnorm_back(dm, cc["xm"], W[p + "moe_norm"], cc["mr"])
        dxm = dx + dxm_n
        # attention
        G[p + "wo"] = cc["o"].T @ dxm
        do = (dxm @ W[p + "wo"].T).reshape(Bn, T, H, Dh).transpose(0, 2, 1, 3)
        P, qh, kh, vh = cc["P"], cc["qh"], cc["kh"], cc["vh"]
        dP = do @ vh.transpose(0, 1, 3, 2)
        dv = P.transpose(0, 1, 3, 2) @ do
        dS = P * (dP - (P * dP).sum(-1, keepdims=True))
        dq = dS @ kh / np.sqrt(Dh)
        dk = dS.transpose(0, 1, 3, 2) @ qh / np.sqrt(Dh)
        dq = rope(dq.transpose(0, 2, 1, 3), -1).reshape(N, D)
        dk = rope(dk.transpose(0, 2, 1, 3), -1).reshape(N, D)
        dv = dv.transpose(0, 2, 1, 3).reshape(N, D)
        a = cc["a"]
        G[p + "wq"], G[p + "wk"], G[p + "wv"] = a.T @ dq, a.T @ dk, a.T @ dv
        da = dq @ W[p + "wq"].T + dk @ W[p + "wk"].T + dv @ W[p + "wv"].T
        dxa, G[p + "attn_norm"] = rmsnorm_back(da, cc["x"], W[p + "attn_norm"], cc["ar"])
        dx = dxm + dxa
    np.add.at(G["tok_emb"], tok.reshape(-1), dx)
    return loss, ce, aux, G


def lr_at(o, s):
    if s < o["warmup"]:
        return o["lr"] * (s + 1) / o["warmup"]
    lo = o["lr"] * o["lr_min_ratio"]
    frac = min(1.0, (s - o["warmup"]) / (o["steps"] - o["warmup"]))
    return lo + 0.5 * (o["lr"] - lo) * (1 + np.cos(np.pi * frac))


def make(outdir):
    rng = np.random.default_rng(SEED)
    c = CFG
    W = {}
    for name, shape in tensor_names(c):
        if len(shape) == 1:
            W[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            W[name] = (0.3 * rng.standard_normal(shape)).astype(np.float32)
    seq = rng.integers(0, c["V"], size=(B, c["T"] + 1))
    tok, tgt = seq[:, :-1], seq[:, 1:]
    # the C side starts from these fp32 weights; compute in float64
    P = {n: w.astype(np.float64) for n, w in W.items()}
    M = {n: np.zeros_like(w) for n, w in P.items()}
    V2 = {n: np.zeros_like(w) for n, w in P.items()}
    o = OPT
    rows = []
    for s in range(NSTEPS):
        loss, ce, aux, G = forward_backward(P, tok, tgt, c, AUX_COEF)
        gn = np.sqrt(sum((g * g).sum() for g in G.values()))
        scale = o["clip"] / gn if gn > o["clip"] else 1.0
        lr = lr_at(o, s)
        t = s + 1
        for n in P:
            g = G[n] * scale
            M[n] = o["beta1"] * M[n] + (1 - o["beta1"]) * g
            V2[n] = o["beta2"] * V2[n] + (1 - o["beta2"]) * g * g
            mh = M[n] / (1 - o["beta1"] ** t)
            vh = V2[n] / (1 - o["beta2"] ** t)
            wd = o["weight_decay"] if P[n].ndim > 1 else 0.0
            P[n] = P[n] - lr * (mh / (np.sqrt(vh) + o["eps"]) + wd * P[n])
        rows.append((loss, ce, aux, gn))
    pnorm = np.sqrt(sum((w * w).sum() for w in P.values()))

    with h5py.File(outdir + "/reference_tiny.h5", "w") as f:
        f.attrs["format"] = np.bytes_("sigma-checkpoint")
        f.attrs["format_version"] = np.int32(1)
        f.attrs["step"] = np.int64(0)
        g = f.create_group("config")
        for k in ("V", "D", "L", "H", "T", "E", "K", "F"):
            g.attrs[k] = np.int32(c[k])
        g.attrs["aux_coef"] = np.float32(AUX_COEF)
        g.attrs["batch"] = np.int32(B)
        mg = f.create_group("model")
        for name, _ in tensor_names(c):
            mg.create_dataset(name, data=W[name], fletcher32=True, chunks=W[name].shape)
        pg = f.create_group("provenance")
        pg.attrs["program"] = np.bytes_("tests/unit/data/reference.py (numpy %s)" % np.__version__)
        f.attrs["complete"] = np.int32(1)
    with open(outdir + "/reference_tiny.txt", "w") as f:
        f.write("# written by reference.py: an independent numpy (float64) model\n")
        f.write("# batch of %d sequences of T+1 tokens; expected values per step\n" % B)
        for k in ("V", "D", "L", "H", "T", "E", "K", "F"):
            f.write("%s=%d\n" % (k, c[k]))
        f.write("batch=%d\naux_coef=%r\n" % (B, AUX_COEF))
        for k, v in OPT.items():
            f.write("%s=%r\n" % (k, v))
        f.write("nsteps=%d\n" % NSTEPS)
        for b in range(B):
            f.write("seq.%d=%s\n" % (b, ",".join(str(int(x)) for x in seq[b])))
        for s, (loss, ce, aux, gn) in enumerate(rows):
            f.write("loss.%d=%.12g\nce.%d=%.12g\naux.%d=%.12g\ngrad_norm.%d=%.12g\n"
                    % (s, loss, s, ce, s, aux, s, gn))
        f.write("param_norm.%d=%.12g\n" % (NSTEPS, pnorm))
    for s, r in enumerate(rows):
        print("step %d loss %.8f ce %.8f aux %.8f grad_norm %.8f" % ((s,) + r))


def loss_of(ckpt, tokfile, nseq):
    with h5py.File(ckpt, "r") as f:
        c = {k: int(f["config"].attrs[k]) for k in ("V", "D", "L", "H", "T", "E", "K", "F")}
        aux_coef = float(f["config"].attrs["aux_coef"])
        W = {n: f["model"][n][()].astype(np.float64) for n, _ in tensor_names(c)}
    raw = open(tokfile, "rb").read()
    assert raw[:8] == b"SIGMATOK", "not a token file"
    width = int.from_bytes(raw[20:24], "little")
    toks = np.frombuffer(raw[64:], dtype={1: np.uint8, 2: "<u2", 4: "<u4"}[width]).astype(np.int64)
    T = c["T"]
    seq = np.stack([toks[i * T: i * T + T + 1] for i in range(nseq)])
    loss, ce, aux, _ = forward_backward(W, seq[:, :-1], seq[:, 1:], c, aux_coef, False)
    print("loss %.8f ce %.8f aux %.8f" % (loss, ce, aux))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "make":
        make(sys.argv[2] if len(sys.argv) > 2 else ".")
    elif len(sys.argv) >= 4 and sys.argv[1] == "loss":
        loss_of(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2)
    else:
        sys.stderr.write(__doc__)
        sys.exit(64)
