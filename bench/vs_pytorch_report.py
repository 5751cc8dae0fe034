#!/usr/bin/env python3
"""The report of bench/vs-pytorch.sh: medians of its measurements per side
and row, the ratios nmt / PyTorch and against each lever, FLOPs against the
measured peak; writes the result JSON and prints the table.

  vs_pytorch_report.py TSV SGEMM_JSON FLOPS_JSON THREADS COMMIT HOST PAIRS VALID CKPT OUT NMT_VERSION

Run by bench/vs-pytorch.sh with Debian's python3 (python3-torch: it records
PyTorch's version)."""
import json
import os
import platform
import statistics
import sys

import torch

tsv, sgemm, flops, threads, commit, host, pairs, nvalid, ckpt, out, nmt_version = sys.argv[1:]
rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
values = {}
for r, side, row, v in rows:
    values.setdefault((side, row), []).append(float(v))
med = {k: statistics.median(v) for k, v in values.items()}
sgemm, flops = json.loads(sgemm), json.loads(flops)
table = []
fixed_rows = sorted({row for (side, row) in values if row.startswith("train_fixed_b")})
variants = ["int8", "bf16", "shortlist", "int8-shortlist", "bf16-shortlist", "eager"]  # decoding options (same loop above)
for row in ["train_corpus_tok_s", "train_fixed_tok_s"] + fixed_rows + ["decode_b1_sent_s", "decode_b5_sent_s",
            "decode_fixed_b1_sent_s", "decode_fixed_b5_sent_s", "train_peak_rss_mb"]:
    n, p, q = med.get(("nmt", row)), med.get(("pytorch", row)), med.get(("nmt-plain", row))
    alt = next((x for x in ("nmt-whole", "nmt-parts", "nmt-serial") if (x, row) in med), None)
    a = med.get((alt, row))
    pa = med.get(("pytorch-avx512", row))
    table.append({"row": row, "nmt": n, "pytorch": p, "ratio": n / p if n and p else None,
                  # the mirror with LibTorch's AVX-512 kernels, as nmt picks them (ATEN_CPU_CAPABILITY=avx512)
                  "pytorch_avx512": pa, "ratio_vs_pytorch_avx512": n / pa if n and pa else None,
                  "pytorch_avx512_rounds": values.get(("pytorch-avx512", row)),
                  "nmt_plain": q, "nmt_over_plain": n / q if n and q else None,
                  "nmt_optimized": med.get(("nmt-optimized", row)),
                  # nmt-train --cuda-graphs (training rows on CUDA, or with NMT_BENCH_GRAPHS=1)
                  "nmt_graphs": med.get(("nmt-graphs", row)),
                  "graphs_ratio": med[("nmt-graphs", row)] / p if ("nmt-graphs", row) in med and p else None,
                  "nmt_graphs_rounds": values.get(("nmt-graphs", row)),
                  # a lever against the default: whole batches (training on text), one part per thread
                  # (fixed shapes), parallel batches off (decoding)
                  "alt_side": alt, "nmt_alt": a,
                  "nmt_over_alt": n / a if n and a else None,
                  "alt_ratio": a / p if a and p else None,
                  "nmt_alt_rounds": values.get((alt, row)),
                  **{k: v for x in variants for k, v in (
                      (f"nmt_{x}", med.get((f"nmt-{x}", row))),
                      (f"{x}_ratio", med[(f"nmt-{x}", row)] / p if (f"nmt-{x}", row) in med and p else None),
                      (f"nmt_{x}_rounds", values.get((f"nmt-{x}", row))))},
                  "nmt_rounds": values.get(("nmt", row)), "pytorch_rounds": values.get(("pytorch", row)),
                  "nmt_plain_rounds": values.get(("nmt-plain", row)),
                  "nmt_optimized_rounds": values.get(("nmt-optimized", row))})
alone, busy = med.get(("nmt", "train_corpus_tok_s")), med.get(("nmt", "train_corpus_tok_s_beside_busy"))
busy_fixed = med.get(("nmt", "train_corpus_tok_s_beside_busy_fixed_threads"))
fpt = flops["flops_per_tgt_token"]
decode_flops = {b: flops[f"decode_flops_per_sentence_b{b}"] for b in (1, 5) if f"decode_flops_per_sentence_b{b}" in flops}
result = {
    "table": table,
    "same_lines": {f"beam{b}": med.get(("both", f"decode_b{b}_same_lines")) for b in (1, 5)},
    "serial_same_lines_as_parallel": {f"beam{b}": med.get(("both", f"decode_b{b}_serial_same_lines")) for b in (1, 5)},
    **{f"{x}_same_lines_as_float": {f"beam{b}": med.get(("both", f"decode_b{b}_{x}_same_lines")) for b in (1, 5)}
       for x in variants},
    "valid_sentences": int(nvalid), "train_pairs": int(pairs), "decode_checkpoint": ckpt,
    "contention": {"alone_tok_s": alone, "beside_one_busy_tok_s": busy, "kept": busy / alone if alone and busy else None,
                   "beside_one_busy_fixed_threads_tok_s": busy_fixed,
                   "kept_fixed_threads": busy_fixed / alone if alone and busy_fixed else None},
    "flops_per_tgt_token": fpt, "sgemm_peak_gflops": sgemm["gflops"], "sgemm_peak_gflops_bf16": sgemm.get("gflops_bf16"),
    "device": sgemm.get("device", "cpu"),
    "achieved_gflops_training": {s: med[(s, "train_corpus_tok_s")] * fpt / 1e9 for s in ("nmt", "nmt-graphs", "pytorch")
                                 if (s, "train_corpus_tok_s") in med},
    # decoding val: sentences/s x the products of a sentence of Multi30k's mean lengths
    # (the decoding model's sizes; a translation counted as long as the references)
    "achieved_gflops_decoding": {s: {f"beam{b}": med[(s, f"decode_b{b}_sent_s")] * fps / 1e9
                                     for b, fps in decode_flops.items() if (s, f"decode_b{b}_sent_s") in med}
                                 for s in ("nmt", "pytorch")},
    "threads": int(threads), "commit": commit, "host": host,
    "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), ""),
    # the vector units, which tell machines of one "model name" apart
    "cpu_features": sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags")
                            for f in l.split(":", 1)[1].split() if f.startswith(("avx", "amx", "fma"))}),
    "pytorch": torch.__version__, "python": platform.python_version(),
    # nmt's --version lines (its commit, and the BLAS kernels both sides ran:
    # OPENBLAS_CORETYPE, when set, forces them for both)
    "nmt_version": nmt_version.splitlines(),
    "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    # the kernel family each side ran: nmt's (its --version) and the mirror's (set to nmt's)
    "blas_kernels": {"nmt": next((l for l in nmt_version.splitlines() if l.startswith("BLAS: ")), None),
                     "pytorch": sgemm.get("blas_kernels")},
}
with open(out + ".part", "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
os.replace(out + ".part", out)
print(f"{'row':<24} {'nmt':>10} {'pytorch':>10} {'ratio':>7} {'pt-avx512':>10} {'ratio':>7} {'nmt-plain':>10} {'nmt/plain':>9} {'nmt-opt':>10} "
      + f"{'alternative':>24} {'nmt/alt':>7} {'graphs':>10} {'/pt':>5} "
      + " ".join(f"{x:>14} {'/pt':>5}" for x in variants))
for t in table:
    fmt = lambda x: f"{x:10.1f}" if x is not None else f"{'-':>10}"
    rnd = lambda x, w: f"{'-':>{w}}" if x is None else f"{x:{w}.2f}"
    print(f"{t['row']:<24} {fmt(t['nmt'])} {fmt(t['pytorch'])} {rnd(t['ratio'], 7)} {fmt(t['pytorch_avx512'])} "
          f"{rnd(t['ratio_vs_pytorch_avx512'], 7)} {fmt(t['nmt_plain'])} "
          f"{rnd(t['nmt_over_plain'], 9)} {fmt(t['nmt_optimized'])} "
          f"{(t['alt_side'] or '-'):>13} {fmt(t['nmt_alt'])} {rnd(t['nmt_over_alt'], 7)} "
          f"{fmt(t['nmt_graphs'])} {rnd(t['graphs_ratio'], 5)} "
          + " ".join(f"{fmt(t['nmt_' + x]):>14} {rnd(t[x + '_ratio'], 5)}" for x in variants))
print(f"contention: {result['contention']}")
print(f"FLOPs per target token {fpt:.3g}; fp32 peak {sgemm['gflops']:.1f} GFLOP/s; "
      f"achieved in training {result['achieved_gflops_training']}, decoding {result['achieved_gflops_decoding']}")
print(f"wrote {out}")
