#!/usr/bin/env python3
"""PyTorch (eager, Python) mirror of nmt's model, used only as the yardstick of
bench/vs-pytorch.sh. Same architecture, parameter names and shapes as
src/model/model.cc (bidirectional GRU encoder over packed sequences, additive
attention, Bahdanau or conditional-GRU decoder, deep output, tied
embeddings), the same batch planning (src/text/batching.cc), training step
(summed label-smoothed cross-entropy / target tokens, gradient-norm clipping,
Adam) and searches (src/search/search.cc), so both sides do the same work.

  nmt_ref.py train-corpus --src F --tgt F --src-spm M --tgt-spm M [sizes] [--epochs N]
  nmt_ref.py train-fixed  [sizes] --batch 64 --src-len 16 --tgt-len 16 --steps N
  nmt_ref.py decode -m nmt.ckpt --src-spm M --tgt-spm M --input F --beam K [--output F]
  nmt_ref.py decode-fixed -m nmt.ckpt --batch 64 --src-len 16 --steps REPS --beam K
  nmt_ref.py sgemm [--n 2048]        measured fp32 matrix-product peak
  nmt_ref.py flops [sizes] --src-len S --tgt-len T   model FLOPs per target token

Each prints one JSON line on stdout. Threads: torch.set_num_threads(--threads).
--device cuda runs on the GPU (timings synchronize the device before each clock read).
"""
import argparse
import io
import json
import math
import random
import resource
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, UNK, BOS, EOS = 0, 1, 2, 3
DEV = torch.device("cpu")  # --device


def sync():
    """Waits for the device's queued work, so that a clock read after it counts that work."""
    if DEV.type == "cuda":
        torch.cuda.synchronize()


# --- the model (src/model/model.cc) -------------------------------------------

class Sizes:
    def __init__(self, src_vocab, tgt_vocab, emb, enc_hidden, dec_hidden, attn, decoder="bahdanau",
                 tie=True, dropout=0.3):
        self.src_vocab, self.tgt_vocab, self.emb = src_vocab, tgt_vocab, emb
        self.enc_hidden, self.dec_hidden, self.attn = enc_hidden, dec_hidden, attn
        self.decoder, self.tie, self.dropout = decoder, tie, dropout


class Encoder(nn.Module):
    def __init__(self, z):
        super().__init__()
        self.H = z.enc_hidden
        self.embed = nn.Embedding(z.src_vocab, z.emb, padding_idx=PAD)
        self.rnn = nn.GRU(z.emb, z.enc_hidden, bidirectional=True, batch_first=True)
        self.init = nn.Linear(z.enc_hidden, z.dec_hidden)
        self.drop = nn.Dropout(z.dropout)

    def forward(self, src, src_len):
        S = src.size(1)
        x = self.drop(self.embed(src))                                    # [B, S, E]
        packed = pack_padded_sequence(x, src_len, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        ann, _ = pad_packed_sequence(out, batch_first=True, padding_value=0.0, total_length=S)  # [B, S, 2H]
        mask = src.ne(PAD)                                                # [B, S]
        init = torch.tanh(self.init(ann[:, 0, self.H:]))                  # [B, D]
        return self.drop(ann), mask, init


class Attention(nn.Module):  # additive (Bahdanau)
    def __init__(self, z):
        super().__init__()
        self.W = nn.Linear(z.dec_hidden, z.attn, bias=False)
        self.U = nn.Linear(2 * z.enc_hidden, z.attn, bias=True)
        self.v = nn.Linear(z.attn, 1, bias=False)

    def keys(self, ann):
        return self.U(ann)                                                # [B, S, A]

    def forward(self, query, keys, ann, mask):
        scores = self.v(torch.tanh(keys + self.W(query).unsqueeze(1))).squeeze(2)  # [B, S]
        scores = scores.masked_fill(~mask, float("-inf"))
        alpha = torch.softmax(scores, dim=1)
        return torch.bmm(alpha.unsqueeze(1), ann).squeeze(1), alpha      # [B, C], [B, S]


class Decoder(nn.Module):
    def __init__(self, z):
        super().__init__()
        C = 2 * z.enc_hidden
        self.cgru = z.decoder == "cgru"
        self.embed = nn.Embedding(z.tgt_vocab, z.emb, padding_idx=PAD)
        self.attention = Attention(z)
        if self.cgru:
            self.cell = nn.GRUCell(z.emb, z.dec_hidden)
            self.cell2 = nn.GRUCell(C, z.dec_hidden)
        else:
            self.cell = nn.GRUCell(z.emb + C, z.dec_hidden)
        self.deep = nn.Linear(z.dec_hidden + C + z.emb, z.emb)
        if z.tie:
            with torch.no_grad():
                nn.init.normal_(self.embed.weight, 0.0, 1.0 / math.sqrt(z.emb))
                self.embed.weight[PAD].zero_()
            self.out_weight = None
        else:
            self.out_weight = nn.Parameter(torch.randn(z.tgt_vocab, z.emb) / math.sqrt(z.emb))
        self.out_bias = nn.Parameter(torch.zeros(z.tgt_vocab))
        self.drop = nn.Dropout(z.dropout)

    def output(self, s, c, ey):
        t = torch.tanh(self.deep(torch.cat([s, c, ey], -1)))
        w = self.embed.weight if self.out_weight is None else self.out_weight
        return F.linear(self.drop(t), w, self.out_bias)

    def recur(self, ey, state, ann, mask, keys):
        if self.cgru:
            s1 = self.cell(ey, state)
            c, alpha = self.attention(s1, keys, ann, mask)
            return self.cell2(c, s1), c, alpha
        c, alpha = self.attention(state, keys, ann, mask)
        return self.cell(torch.cat([ey, c], 1), state), c, alpha

    def forward(self, tgt_in, ann, mask, init):
        keys = self.attention.keys(ann)
        ey = self.drop(self.embed(tgt_in))                                # [B, T, E]
        s = init
        states, contexts = [], []
        for t in range(tgt_in.size(1)):
            s, c, _ = self.recur(ey[:, t], s, ann, mask, keys)
            states.append(s)
            contexts.append(c)
        return self.output(torch.stack(states, 1), torch.stack(contexts, 1), ey)  # [B, T, V]

    def step(self, y_prev, state, ann, mask, keys):
        ey = self.drop(self.embed(y_prev))
        s, c, _ = self.recur(ey, state, ann, mask, keys)
        return s, self.output(s, c, ey)


class Seq2Seq(nn.Module):
    def __init__(self, z):
        super().__init__()
        self.encoder = Encoder(z)
        self.decoder = Decoder(z)

    def forward(self, src, src_len, tgt_in):
        return self.decoder(tgt_in, *self.encoder(src, src_len))


def load_nmt_checkpoint(path):
    """Builds the mirror from an nmt checkpoint: sizes from the weight shapes,
    weights by name. After the 24-byte NMTCKPT header (magic, version, body
    size, CRC-32) the body is in the safetensors layout (src/model/tensor_file.h):
    a little-endian uint64 N, N bytes of JSON naming each tensor's dtype, shape
    and byte range, then the bytes; the weights are the tensors "model.*"."""
    data = open(path, "rb").read()
    if data[:8] != b"NMTCKPT\n":
        sys.exit(f"{path}: not an nmt checkpoint")
    version = struct.unpack("<I", data[8:12])[0]
    if version < 3:
        sys.exit(f"{path}: checkpoint format {version}; convert it first: nmt-train --convert {path} NEW.ckpt")
    body = data[24:]
    n = struct.unpack("<Q", body[:8])[0]
    header = json.loads(body[8:8 + n])
    dtypes = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16,
              "I64": torch.int64, "U8": torch.uint8}
    weights = {}
    for name, e in header.items():
        if not name.startswith("model."):
            continue
        begin, end = e["data_offsets"]
        raw = bytearray(body[8 + n + begin:8 + n + end])
        t = torch.frombuffer(raw, dtype=dtypes[e["dtype"]]) if raw else torch.empty(0, dtype=dtypes[e["dtype"]])
        weights[name[len("model."):]] = t.reshape(e["shape"]).float()
    z = Sizes(src_vocab=weights["encoder.embed.weight"].shape[0], tgt_vocab=weights["decoder.embed.weight"].shape[0],
              emb=weights["encoder.embed.weight"].shape[1], enc_hidden=weights["encoder.init.weight"].shape[1],
              dec_hidden=weights["encoder.init.weight"].shape[0], attn=weights["decoder.attention.W.weight"].shape[0],
              decoder="cgru" if "decoder.cell2.weight_ih" in weights else "bahdanau",
              tie="decoder.out_weight" not in weights)
    model = Seq2Seq(z)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        sys.exit(f"{path}: weights do not match the mirror (missing {missing}, unexpected {unexpected})")
    return model, z


# --- batches (src/text/batching.cc, src/model/batch.cc) -----------------------

def cut_batches(lengths, order, max_sentences, max_tokens):
    """lengths[i] = (src pieces incl. EOS, tgt pieces + 1)."""
    batches, cur, ms, mt = [], [], 0, 0
    for i in order:
        s, t = lengths[i]
        ns, nt, n = max(ms, s), max(mt, t), len(cur) + 1
        fits = n <= max_sentences and (max_tokens <= 0 or n * max(ns, nt) <= max_tokens)
        if cur and not fits:
            batches.append(cur)
            cur, ms, mt = [], s, t
        else:
            ms, mt = ns, nt
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def plan_batches(examples, max_tokens, max_sentences, seed):
    """Sorted by (source, target) length, ties shuffled: the same batch shapes as nmt's plan."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda i: (len(examples[i][0]), len(examples[i][1])))
    lengths = [(len(s), len(t) + 1) for s, t in examples]
    return cut_batches(lengths, order, max_sentences, max_tokens)


def make_batch(examples, idx, with_target=True):
    B = len(idx)
    S = max(len(examples[i][0]) for i in idx)
    src = torch.full((B, S), PAD, dtype=torch.long)
    src_len = torch.empty(B, dtype=torch.long)
    for r, i in enumerate(idx):
        s = examples[i][0]
        src[r, :len(s)] = torch.tensor(s)
        src_len[r] = len(s)
    if not with_target:
        return src.to(DEV), src_len, None, None
    T = max(len(examples[i][1]) for i in idx) + 1
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), PAD, dtype=torch.long)
    for r, i in enumerate(idx):
        y = examples[i][1]
        tgt_in[r, 0] = BOS
        tgt_in[r, 1:len(y) + 1] = torch.tensor(y, dtype=torch.long)
        tgt_out[r, :len(y)] = torch.tensor(y, dtype=torch.long)
        tgt_out[r, len(y)] = EOS
    return src.to(DEV), src_len, tgt_in.to(DEV), tgt_out.to(DEV)  # src_len stays on the host (packing)


def read_examples(src_path, tgt_path, sp_src, sp_tgt, max_src=100, max_tgt=100):
    examples = []
    with open(src_path, encoding="utf-8") as fs, open(tgt_path, encoding="utf-8") as ft:
        for a, b in zip(fs, ft):
            a, b = a.rstrip("\n"), b.rstrip("\n")
            if not a.strip() or not b.strip():
                continue
            s, t = sp_src.EncodeAsIds(a), sp_tgt.EncodeAsIds(b)
            if len(s) > max_src or len(t) > max_tgt:
                continue
            examples.append((s + [EOS], t))
    return examples


# --- training (src/train/trainer.cc forward_backward) -------------------------

def distinct_parameters(model):
    seen, out = set(), []
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def train_steps(model, batches, lr, label_smoothing, clip):
    """Runs one training step per batch; returns (target tokens, step seconds)."""
    params = distinct_parameters(model)
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999))
    model.train()
    tokens, seconds = 0, 0.0
    sync()
    for make in batches:
        t0 = time.perf_counter()
        src, src_len, tgt_in, tgt_out = make()
        logits = model(src, src_len, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=PAD,
                               label_smoothing=label_smoothing, reduction="sum")
        n = int(tgt_out.ne(PAD).sum())
        loss_sum = loss.item()
        opt.zero_grad()
        if math.isfinite(loss_sum):
            (loss / n).backward()
            torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
        sync()
        seconds += time.perf_counter() - t0
        tokens += n
    return tokens, seconds


# --- search (src/search/search.cc) -------------------------------------------

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


# --- FLOPs --------------------------------------------------------------------

def flops_per_target_token(z, src_len, tgt_len):
    """Multiply-adds x 2 of one training step per target token, counting
    forward as the matrix products and backward as twice those (the usual
    3x rule); elementwise work is left out."""
    E, H, D, A, V, C = z.emb, z.enc_hidden, z.dec_hidden, z.attn, z.tgt_vocab, 2 * z.enc_hidden
    enc = src_len * (2 * 3 * H * (E + H))                       # both directions, per sentence
    keys = src_len * C * A
    dec_in = E if z.decoder == "cgru" else E + C
    per_step = 3 * D * (dec_in + D) + D * A + src_len * (A + C) + (D + C + E) * E + E * V
    if z.decoder == "cgru":
        per_step += 3 * D * (C + D)
    forward = 2 * ((enc + keys) / tgt_len + per_step)
    return 3 * forward


# --- commands -----------------------------------------------------------------

def sizes_from(args, src_vocab, tgt_vocab):
    return Sizes(src_vocab, tgt_vocab, args.emb, args.enc_hidden, args.dec_hidden, args.attn, args.decoder,
                 not args.untied, args.dropout)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def openblas_kernels():
    """The OpenBLAS kernel family this process runs ("Cooperlake"), or None
    when the BLAS is not OpenBLAS (torch loads it: ask the loaded library)."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=ctypes.RTLD_GLOBAL)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["train-corpus", "train-fixed", "decode", "decode-fixed", "sgemm", "flops"])
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--seed", type=int, default=1)
    for name, default in [("emb", 256), ("enc-hidden", 256), ("dec-hidden", 512), ("attn", 512),
                          ("src-vocab", 8000), ("tgt-vocab", 8000)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--decoder", default="bahdanau", choices=["bahdanau", "cgru"])
    p.add_argument("--untied", action="store_true")
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--max-batch-sentences", type=int, default=128)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--src"), p.add_argument("--tgt"), p.add_argument("--src-spm"), p.add_argument("--tgt-spm")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--src-len", type=int, default=16)
    p.add_argument("--tgt-len", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("-m", "--model")
    p.add_argument("--input")
    p.add_argument("--output")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--n", type=int, default=2048)
    a = p.parse_args()
    global DEV
    DEV = torch.device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    result = {"command": a.command, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "device": torch.cuda.get_device_name() if DEV.type == "cuda" else "cpu"}

    if a.command == "train-corpus":
        import sentencepiece as spm
        sp_src = spm.SentencePieceProcessor(model_file=a.src_spm)
        sp_tgt = spm.SentencePieceProcessor(model_file=a.tgt_spm)
        examples = read_examples(a.src, a.tgt, sp_src, sp_tgt)
        z = sizes_from(a, sp_src.GetPieceSize(), sp_tgt.GetPieceSize())
        model = Seq2Seq(z).to(DEV)
        plan = plan_batches(examples, a.batch_tokens, a.max_batch_sentences, a.seed)
        rng = random.Random(a.seed)
        makers = []
        for _ in range(a.epochs):
            order = list(range(len(plan)))
            rng.shuffle(order)
            makers += [lambda idx=plan[i]: make_batch(examples, idx) for i in order]
        tokens, seconds = train_steps(model, makers, a.lr, a.label_smoothing, a.clip)
        result.update(batches_per_epoch=len(plan), steps=len(makers), tgt_tokens=tokens, seconds=seconds,
                      tgt_tokens_per_s=tokens / seconds, peak_rss_mb=peak_rss_mb())
    elif a.command == "train-fixed":
        z = sizes_from(a, a.src_vocab, a.tgt_vocab)
        model = Seq2Seq(z).to(DEV)
        g = torch.Generator().manual_seed(a.seed)

        def make():
            src = torch.randint(4, z.src_vocab, (a.batch, a.src_len), generator=g)
            tgt = torch.randint(4, z.tgt_vocab, (a.batch, a.tgt_len), generator=g)
            tgt_in = torch.cat([torch.full((a.batch, 1), BOS), tgt[:, :-1]], 1)
            return src.to(DEV), torch.full((a.batch,), a.src_len), tgt_in.to(DEV), tgt.to(DEV)
        train_steps(model, [make] * 3, a.lr, a.label_smoothing, a.clip)  # warm-up
        tokens, seconds = train_steps(model, [make] * a.steps, a.lr, a.label_smoothing, a.clip)
        result.update(steps=a.steps, tgt_tokens=tokens, seconds=seconds, tgt_tokens_per_s=tokens / seconds,
                      ms_per_step=1000 * seconds / a.steps, peak_rss_mb=peak_rss_mb())
    elif a.command == "decode":
        import sentencepiece as spm
        model, z = load_nmt_checkpoint(a.model)
        model.to(DEV).eval()
        sp_src = spm.SentencePieceProcessor(model_file=a.src_spm)  # the run folder's, as in the checkpoint
        sp_tgt = spm.SentencePieceProcessor(model_file=a.tgt_spm)
        lines = [l.rstrip("\n") for l in open(a.input, encoding="utf-8")]
        srcs = [sp_src.EncodeAsIds(l) + [EOS] for l in lines]
        sync()
        t0 = time.perf_counter()
        ids = decode(model, srcs, a.beam)
        sync()
        seconds = time.perf_counter() - t0
        outs = [sp_tgt.DecodeIds(h) for h in ids]
        if a.output:
            with open(a.output, "w", encoding="utf-8") as f:
                f.writelines(o + "\n" for o in outs)
        result.update(sentences=len(lines), beam=a.beam, seconds=seconds, sentences_per_s=len(lines) / seconds,
                      output_pieces=sum(len(h) for h in ids), peak_rss_mb=peak_rss_mb())
    elif a.command == "decode-fixed":
        model, z = load_nmt_checkpoint(a.model)
        model.to(DEV).eval()
        V = model.encoder.embed.num_embeddings  # the tokens of nmt-bench-step decode
        src = (torch.arange(a.batch).unsqueeze(1) * 131 + torch.arange(a.src_len).unsqueeze(0) * 17).remainder(V - 4) + 4
        src, src_len = src.to(DEV), torch.full((a.batch,), a.src_len)
        run = (lambda: greedy(model, src, src_len)) if a.beam == 1 else (lambda: beam(model, src, src_len, a.beam))
        run()
        times = []
        for _ in range(a.steps):
            sync()
            t0 = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - t0)
        med = sorted(times)[len(times) // 2]
        result.update(batch=a.batch, beam=a.beam, median_seconds=med, sentences_per_s=a.batch / med)
    elif a.command == "sgemm":
        peaks = {}
        for name, dtype in [("gflops", torch.float32)] + ([("gflops_bf16", torch.bfloat16)] if DEV.type == "cuda" else []):
            x = torch.randn(a.n, a.n, device=DEV).to(dtype)
            y = torch.randn(a.n, a.n, device=DEV).to(dtype)
            torch.mm(x, y)
            times = []
            for _ in range(5):
                sync()
                t0 = time.perf_counter()
                torch.mm(x, y)
                sync()
                times.append(time.perf_counter() - t0)
            peaks[name] = 2 * a.n ** 3 / min(times) / 1e9
        result.update(n=a.n, **peaks)
        result.update(blas_kernels=openblas_kernels())
    elif a.command == "flops":
        z = sizes_from(a, a.src_vocab, a.tgt_vocab)
        result.update(flops_per_tgt_token=flops_per_target_token(z, a.src_len, a.tgt_len))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
