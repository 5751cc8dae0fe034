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
  nmt_ref.py flops [sizes] --src-len S --tgt-len T [-m nmt.ckpt]
                                                    model FLOPs per target token (training), and
                                                    with -m per sentence (decoding, beam 1 and 5)

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

import nmt_ref_model as M
from nmt_ref_data import cut_batches, make_batch, plan_batches, read_examples
from nmt_ref_model import BOS, EOS, PAD, Seq2Seq, Sizes, load_nmt_checkpoint, sync
from nmt_ref_search import decode, greedy, beam


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




# --- FLOPs --------------------------------------------------------------------

def products(z, src_len):
    """Multiply-adds of one sentence's encoder and attention keys over SRC_LEN
    pieces, and of one decoder step of one row (the output layer over the
    whole vocabulary included); elementwise work is left out."""
    E, H, D, A, V, C = z.emb, z.enc_hidden, z.dec_hidden, z.attn, z.tgt_vocab, 2 * z.enc_hidden
    enc = src_len * (2 * 3 * H * (E + H))                       # both directions, per sentence
    keys = src_len * C * A
    dec_in = E if z.decoder == "cgru" else E + C
    per_step = 3 * D * (dec_in + D) + D * A + src_len * (A + C) + (D + C + E) * E + E * V
    if z.decoder == "cgru":
        per_step += 3 * D * (C + D)
    return enc + keys, per_step


def flops_per_target_token(z, src_len, tgt_len):
    """Multiply-adds x 2 of one training step per target token, counting
    forward as the matrix products and backward as twice those (the usual
    3x rule); elementwise work is left out."""
    sentence, per_step = products(z, src_len)
    forward = 2 * (sentence / tgt_len + per_step)
    return 3 * forward


def decode_flops_per_sentence(z, src_len, tgt_len, beam):
    """Multiply-adds x 2 of translating one sentence of SRC_LEN pieces into
    TGT_LEN (EOS included) with BEAM rows a step: the encoder once, and each
    step's products for every row; the search's own work is left out."""
    sentence, per_step = products(z, src_len)
    return 2 * (sentence + beam * tgt_len * per_step)


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
    M.DEV = torch.device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    result = {"command": a.command, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "device": torch.cuda.get_device_name() if M.DEV.type == "cuda" else "cpu"}

    if a.command == "train-corpus":
        import sentencepiece as spm
        sp_src = spm.SentencePieceProcessor(model_file=a.src_spm)
        sp_tgt = spm.SentencePieceProcessor(model_file=a.tgt_spm)
        examples = read_examples(a.src, a.tgt, sp_src, sp_tgt)
        z = sizes_from(a, sp_src.GetPieceSize(), sp_tgt.GetPieceSize())
        model = Seq2Seq(z).to(M.DEV)
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
        model = Seq2Seq(z).to(M.DEV)
        g = torch.Generator().manual_seed(a.seed)

        def make():
            src = torch.randint(4, z.src_vocab, (a.batch, a.src_len), generator=g)
            tgt = torch.randint(4, z.tgt_vocab, (a.batch, a.tgt_len), generator=g)
            tgt_in = torch.cat([torch.full((a.batch, 1), BOS), tgt[:, :-1]], 1)
            return src.to(M.DEV), torch.full((a.batch,), a.src_len), tgt_in.to(M.DEV), tgt.to(M.DEV)
        train_steps(model, [make] * 3, a.lr, a.label_smoothing, a.clip)  # warm-up
        tokens, seconds = train_steps(model, [make] * a.steps, a.lr, a.label_smoothing, a.clip)
        result.update(steps=a.steps, tgt_tokens=tokens, seconds=seconds, tgt_tokens_per_s=tokens / seconds,
                      ms_per_step=1000 * seconds / a.steps, peak_rss_mb=peak_rss_mb())
    elif a.command == "decode":
        import sentencepiece as spm
        model, z = load_nmt_checkpoint(a.model)
        model.to(M.DEV).eval()
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
        model.to(M.DEV).eval()
        V = model.encoder.embed.num_embeddings  # the tokens of nmt-bench-step decode
        src = (torch.arange(a.batch).unsqueeze(1) * 131 + torch.arange(a.src_len).unsqueeze(0) * 17).remainder(V - 4) + 4
        src, src_len = src.to(M.DEV), torch.full((a.batch,), a.src_len)
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
        for name, dtype in [("gflops", torch.float32)] + ([("gflops_bf16", torch.bfloat16)] if M.DEV.type == "cuda" else []):
            x = torch.randn(a.n, a.n, device=M.DEV).to(dtype)
            y = torch.randn(a.n, a.n, device=M.DEV).to(dtype)
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
        if a.model:  # decoding: the sizes of the model that decodes
            zd = load_nmt_checkpoint(a.model)[1]
            result.update(decode_decoder=zd.decoder, **{f"decode_flops_per_sentence_b{b}":
                                                         decode_flops_per_sentence(zd, a.src_len, a.tgt_len, b)
                                                         for b in (1, 5)})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
