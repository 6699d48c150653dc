#!/usr/bin/python3
"""torch_moe.py - the model of docs/model.md in PyTorch eager mode on the
CPU, for bench/train-throughput's side-by-side figure: forward, backward
and torch.optim.AdamW per step, tokens/s printed.

  torch_moe.py [--steps N] [--threads T] [--batch B] [demo shapes by default]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as Fn


class MoE(torch.nn.Module):
    def __init__(s, V, D, L, H, T, E, K, F):
        super().__init__()
        s.V, s.D, s.L, s.H, s.T, s.E, s.K, s.F = V, D, L, H, T, E, K, F
        P = torch.nn.Parameter
        nrm = lambda *sh: P(torch.randn(*sh) * 0.02)
        s.tok_emb = nrm(V, D)
        s.attn_norm = torch.nn.ParameterList([P(torch.ones(D)) for _ in range(L)])
        s.moe_norm = torch.nn.ParameterList([P(torch.ones(D)) for _ in range(L)])
        s.wq = torch.nn.ParameterList([nrm(D, D) for _ in range(L)])
        s.wk = torch.nn.ParameterList([nrm(D, D) for _ in range(L)])
        s.wv = torch.nn.ParameterList([nrm(D, D) for _ in range(L)])
        s.wo = torch.nn.ParameterList([nrm(D, D) for _ in range(L)])
        s.router = torch.nn.ParameterList([nrm(D, E) for _ in range(L)])
        s.w1 = torch.nn.ParameterList([nrm(E, D, F) for _ in range(L)])
        s.w3 = torch.nn.ParameterList([nrm(E, D, F) for _ in range(L)])
        s.w2 = torch.nn.ParameterList([nrm(E, F, D) for _ in range(L)])
        s.final_norm = P(torch.ones(D))
        s.w_out = nrm(D, V)
        Dh = D // H
        i = torch.arange(Dh // 2, dtype=torch.float64)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-2 * i / Dh)
        s.register_buffer("cos", torch.cos(ang).float())
        s.register_buffer("sin", torch.sin(ang).float())
        s.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    @staticmethod
    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g

    def rope(s, x):  # [B, H, T, Dh]
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat([x1 * s.cos - x2 * s.sin, x2 * s.cos + x1 * s.sin], -1)

    def forward(s, tok, tgt):
        B, T = tok.shape
        D, H, E, K = s.D, s.H, s.E, s.K
        Dh = D // H
        x = s.tok_emb[tok].reshape(B * T, D)
        auxs = []
        for l in range(s.L):
            a = s.rms(x, s.attn_norm[l])
            q = (a @ s.wq[l]).view(B, T, H, Dh).transpose(1, 2)
            k = (a @ s.wk[l]).view(B, T, H, Dh).transpose(1, 2)
            v = (a @ s.wv[l]).view(B, T, H, Dh).transpose(1, 2)
            q, k = s.rope(q), s.rope(k)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(Dh)
            att = att.masked_fill(s.mask, float("-inf")).softmax(-1)
            o = (att @ v).transpose(1, 2).reshape(B * T, D)
            x = x + o @ s.wo[l]
            m = s.rms(x, s.moe_norm[l])
            p = (m @ s.router[l]).softmax(-1)
            pk, idx = p.topk(K, -1)
            gate = pk / pk.sum(-1, keepdim=True)
            flat = idx.reshape(-1)
            f = torch.bincount(flat, minlength=E).float() / flat.numel()
            auxs.append(E * (f * p.mean(0)).sum())
            order = flat.argsort()
            counts = torch.bincount(flat, minlength=E).tolist()
            tokidx = order // K
            xe = m[tokidx]
            outs = []
            start = 0
            for e in range(E):
                n = counts[e]
                if n:
                    xs = xe[start:start + n]
                    h = Fn.silu(xs @ s.w1[l][e]) * (xs @ s.w3[l][e])
                    outs.append(h @ s.w2[l][e])
                start += n
            eo = torch.cat(outs, 0) * gate.reshape(-1)[order][:, None]
            y = torch.zeros_like(x).index_add_(0, tokidx, eo)
            x = x + y
        logits = s.rms(x, s.final_norm) @ s.w_out
        ce = Fn.cross_entropy(logits, tgt.reshape(-1))
        return ce + 0.01 * torch.stack(auxs).mean(), ce


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(a.threads)
    V, D, L, H, T, E, K, F = 256, 256, 4, 8, 256, 8, 2, 512
    model = MoE(V, D, L, H, T, E, K, F)
    decay = [p for n, p in model.named_parameters() if "norm" not in n]
    nodecay = [p for n, p in model.named_parameters() if "norm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    seq = torch.randint(0, V, (a.batch, T + 1))
    times = []
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, ce = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step:  # the first step warms up allocators
            times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    print("torch %s eager: %.0f tokens/s (median step %.3f s, %d threads, loss %.4f)"
          % (torch.__version__, a.batch * T / med, med, a.threads, loss.item()))


if __name__ == "__main__":
    main()
