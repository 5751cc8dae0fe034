"""The model half of nmt_ref.py (bench/vs-pytorch.sh's PyTorch mirror):
nmt's network with the same parameter names and shapes (src/model/), and
reading an nmt checkpoint. DEV is the device every side runs on; nmt_ref.py
sets it from --device."""
import io
import json
import math
import struct

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
