"""The batches of nmt_ref.py (bench/vs-pytorch.sh's PyTorch mirror): the
same planning as src/text/batching.cc and the same padded tensors as
src/model/batch.cc."""
import random

import torch

import nmt_ref_model as M
from nmt_ref_model import BOS, EOS, PAD


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
        return src.to(M.DEV), src_len, None, None
    T = max(len(examples[i][1]) for i in idx) + 1
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), PAD, dtype=torch.long)
    for r, i in enumerate(idx):
        y = examples[i][1]
        tgt_in[r, 0] = BOS
        tgt_in[r, 1:len(y) + 1] = torch.tensor(y, dtype=torch.long)
        tgt_out[r, :len(y)] = torch.tensor(y, dtype=torch.long)
        tgt_out[r, len(y)] = EOS
    return src.to(M.DEV), src_len, tgt_in.to(M.DEV), tgt_out.to(M.DEV)  # src_len stays on the host (packing)


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
