"""The searches of nmt_ref.py (bench/vs-pytorch.sh's PyTorch mirror):
greedy and beam search as src/search/search.cc runs them, and translation
of whole inputs as src/translate/translator.cc batches them."""
import torch
import torch.nn.functional as F

from nmt_ref_data import cut_batches, make_batch
from nmt_ref_model import BOS, EOS, PAD


def length_penalty(n, alpha):
    return torch.ones_like(n) if alpha == 0 else ((n + 5.0) / 6.0).pow(alpha)


def length_caps(src_len, ratio=2.0, max_length=256):
    return ((src_len.double() * ratio).floor().long() + 5).clamp_max(max_length)


@torch.inference_mode()
def greedy(model, src, src_len):
    B = src.size(0)
    ann, mask, state = model.encoder(src, src_len)
    keys = model.decoder.attention.keys(ann)
    caps = length_caps(src_len)
    steps = int(caps.max()) + 1
    caps = caps.to(src.device)
    y = torch.full((B,), BOS, dtype=torch.long, device=src.device)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    tokens = []
    for t in range(steps):
        state, logits = model.decoder.step(y, state, ann, mask, keys)
        logp = torch.log_softmax(logits.float(), -1)
        nxt = logp.max(-1)[1]
        nxt = torch.where(caps.le(t), torch.full_like(nxt, EOS), nxt)
        nxt = nxt.masked_fill(finished, PAD)
        tokens.append(nxt)
        finished = finished | nxt.eq(EOS)
        y = nxt
        if bool(finished.all()):
            break
    tok = torch.stack(tokens, 1).tolist()
    out = []
    for row in tok:
        ids = []
        for i in row:
            if i in (EOS, PAD):
                break
            ids.append(i)
        out.append(ids)
    return out


@torch.inference_mode()
def beam(model, src, src_len, K, alpha=0.6):
    B, V = src.size(0), model.decoder.out_bias.numel()
    ann, mask, state = model.encoder(src, src_len)
    ann, mask, state = ann.repeat_interleave(K, 0), mask.repeat_interleave(K, 0), state.repeat_interleave(K, 0)
    keys = model.decoder.attention.keys(ann)
    caps = length_caps(src_len)
    steps = int(caps.max()) + 1
    dev = src.device
    capsK = caps.repeat_interleave(K).unsqueeze(1).to(dev)
    y = torch.full((B * K,), BOS, dtype=torch.long, device=dev)
    score = torch.full((B, K), float("-inf"), device=dev)
    score[:, 0] = 0
    finished = torch.zeros((B, K), dtype=torch.bool, device=dev)
    length = torch.zeros((B, K), dtype=torch.long, device=dev)
    history = torch.empty((B, K, 0), dtype=torch.long, device=dev)
    row0 = (torch.arange(B, device=dev) * K).unsqueeze(1)
    eos_mask = torch.full((1, V), float("-inf"), device=dev)
    eos_mask[0, EOS] = 0
    pad_only = torch.full((1, V), float("-inf"), device=dev)
    pad_only[0, PAD] = 0
    for t in range(steps):
        state, logits = model.decoder.step(y, state, ann, mask, keys)
        logp = torch.log_softmax(logits.float(), -1)
        logp = torch.where(capsK.le(t), logp + eos_mask, logp)
        logp = torch.where(finished.view(B * K, 1), pad_only.expand(B * K, V), logp)
        cand = score.unsqueeze(2) + logp.view(B, K, V)
        cand_len = (length + (~finished).long()).float()
        ranked = cand / length_penalty(cand_len, alpha).unsqueeze(2)
        top = ranked.view(B, K * V).topk(K, 1)[1]
        hyp = torch.div(top, V, rounding_mode="floor")
        token = top.remainder(V)
        rows = (row0 + hyp).view(-1)
        score = cand.view(B, K * V).gather(1, top)
        was = finished.gather(1, hyp)
        length = length.gather(1, hyp) + (~was).long()
        finished = was | token.eq(EOS)
        history = torch.cat([history.gather(1, hyp.unsqueeze(2).expand(B, K, history.size(2))),
                             token.unsqueeze(2)], 2)
        y = token.view(-1)
        state = state.index_select(0, rows)
        if bool(finished.all()):
            break
    norm = score / length_penalty(length.float(), alpha)
    best = norm.argmax(1).tolist()
    out = []
    for b in range(B):
        k, n = best[b], int(length[b, best[b]])
        ids = []
        for i in history[b, k, :n].tolist():
            if i == EOS:
                break
            ids.append(i)
        out.append(ids)
    return out


def decode(model, srcs, K, batch_sentences=64):
    """Longest first, cut by sentences (src/translate/translator.cc); returns ids per input."""
    order = sorted(range(len(srcs)), key=lambda i: -len(srcs[i]))  # stable: Python's sort is
    lengths = [(len(s), 1) for s in srcs]
    out = [None] * len(srcs)
    examples = [(s, []) for s in srcs]
    for idx in cut_batches(lengths, order, batch_sentences, 0):
        src, src_len, _, _ = make_batch(examples, idx, with_target=False)
        hyps = greedy(model, src, src_len) if K == 1 else beam(model, src, src_len, K)
        for i, h in zip(idx, hyps):
            out[i] = h
    return out
