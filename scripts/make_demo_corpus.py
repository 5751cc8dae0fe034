#!/usr/bin/env python3
"""Generate the synthetic demo parallel corpus in data/demo/.

Builds a toy "English-like" source language and a made-up target language
whose translation is fully deterministic but requires reordering, so that an
encoder-decoder must use attention.  Standard library only; the output is
byte-identical for a given --seed.

Source grammar (lowercase words, single spaces):
    S      := CLAUSE | CLAUSE (and|but) CLAUSE
    CLAUSE := SUBJ VERB [OBJ] [PREP NP] [ADV]    (OBJ iff VERB is transitive)
    NP     := DET [NUM] ADJ{0,2} NOUN            (DET optional for plurals)
    VERB   := present (sees/see, agreeing with the subject) | past | will+base

Target rules:
    * clause order SOV:   SUBJ' [ADV'] [NP' POSTP'] [OBJ'] VERB'
    * noun phrase:        [DET'] NOUN' [ri] ADJ'(reversed) [NUM'] [POSS']
    * "the/this/that" agree with the gender (A/B) of the target noun, which
      comes later in the source; "a" is dropped; "my/your" become postposed
      possessives; plural nouns become two words NOUN' + "ri"
    * prepositions become postpositions after their noun phrase
    * verbs are one word stem+tense suffix (-an present, -ek past, -osi
      future); "will VERB" merges into that single word
    * subject and object pronouns have distinct target forms

Writes {train,valid,test}.{src,tgt,align}; .align holds the true word
alignment in Pharaoh format (0-based "srcidx-tgtidx", sorted), tracked
during generation.  Source sentences are unique across all splits.
"""

import argparse
import os
import random

# ---------------------------------------------------------------- lexicon
# noun: (singular, plural, target, gender)
NOUNS = [
    ("dog", "dogs", "tomu", "A"), ("cat", "cats", "mirel", "B"),
    ("bird", "birds", "piko", "A"), ("horse", "horses", "valdo", "A"),
    ("wolf", "wolves", "garun", "A"), ("man", "men", "dosan", "A"),
    ("woman", "women", "lenia", "B"), ("child", "children", "kimo", "A"),
    ("teacher", "teachers", "sarvi", "B"), ("farmer", "farmers", "bolta", "B"),
    ("king", "kings", "rendo", "A"), ("queen", "queens", "rena", "B"),
    ("house", "houses", "domar", "A"), ("tree", "trees", "selvo", "B"),
    ("river", "rivers", "fluma", "B"), ("garden", "gardens", "ortel", "A"),
    ("table", "tables", "banko", "B"), ("book", "books", "libra", "B"),
    ("apple", "apples", "pomi", "A"), ("city", "cities", "urba", "B"),
]
ADJS = [
    ("big", "bara"), ("small", "pitu"), ("red", "rosa"), ("old", "veko"),
    ("young", "juno"), ("happy", "feli"), ("sad", "tristo"),
    ("green", "verda"), ("black", "nero"), ("white", "bela"),
    ("tall", "alto"), ("quiet", "kalmi"), ("clever", "sagi"),
    ("brave", "forti"),
]
# verb: (base, 3sg present, past, target stem)
TRANSITIVE = [
    ("see", "sees", "saw", "vid"), ("like", "likes", "liked", "amor"),
    ("find", "finds", "found", "trov"), ("follow", "follows", "followed", "segu"),
    ("help", "helps", "helped", "jut"), ("watch", "watches", "watched", "mir"),
    ("carry", "carries", "carried", "port"), ("eat", "eats", "ate", "manj"),
    ("call", "calls", "called", "klam"), ("visit", "visits", "visited", "vizit"),
]
INTRANSITIVE = [
    ("sleep", "sleeps", "slept", "dorm"), ("run", "runs", "ran", "kur"),
    ("sing", "sings", "sang", "kant"), ("laugh", "laughs", "laughed", "rid"),
    ("wait", "waits", "waited", "atend"),
]
TENSE_SUFFIX = {"present": "an", "past": "ek", "future": "osi"}
PREPS = [("in", "ne"), ("on", "supa"), ("near", "apud"), ("under", "sub"),
         ("with", "kun"), ("behind", "pos")]
# adverb: (source, target, tense restriction or None)
ADVS = [("quickly", "rapide", None), ("slowly", "lente", None),
        ("often", "ofte", None), ("again", "denove", None),
        ("today", "hodi", None), ("yesterday", "hieru", "past"),
        ("tomorrow", "morgu", "future"), ("now", "nunc", "present")]
# pronoun: (subject, object, target subject, target object, third singular)
PRONOUNS = [("i", "me", "mo", "mon", False), ("you", "you", "vo", "von", False),
            ("he", "him", "lu", "lun", True), ("she", "her", "si", "sin", True),
            ("we", "us", "nos", "noson", False),
            ("they", "them", "ili", "ilin", False)]
AGREEING_DETS = {"the": ("el", "na"), "this": ("kel", "kena"),
                 "that": ("tol", "tona")}          # (gender A, gender B)
POSSESSIVES = {"my": "mia", "your": "via"}
NUMBERS = [("two", "du"), ("three", "tri"), ("four", "kvar"), ("five", "kvin")]
CONJS = [("and", "kaj"), ("but", "sed")]
PLURAL_MARK = "ri"
MIN_LEN, MAX_LEN = 3, 16


def weighted(rng, pairs):
    """Pick from [(item, weight), ...] deterministically."""
    total = sum(w for _, w in pairs)
    x = rng.random() * total
    for item, w in pairs:
        x -= w
        if x < 0:
            return item
    return pairs[-1][0]


class Sentence:
    """Source tokens plus target tokens, each target token with its links."""

    def __init__(self):
        self.src = []
        self.tgt = []  # list of (word, [source indices])

    def s(self, word):
        self.src.append(word)
        return len(self.src) - 1

    def t(self, word, *src_idx):
        assert src_idx, "every target word must be aligned"
        self.tgt.append((word, list(src_idx)))


# ------------------------------------------------------- phrase sampling
# Sampling produces a plan; emit_* writes source words (recording their
# indices into the plan) and later the target words from the plan.

def sample_np(rng):
    noun = rng.choice(NOUNS)
    plural = rng.random() < 0.3
    num = None
    if plural:
        det = weighted(rng, [(None, 4), ("the", 4), ("my", 1), ("your", 1)])
        if rng.random() < 0.4:
            num = rng.choice(NUMBERS)
    else:
        det = weighted(rng, [("the", 45), ("a", 25), ("this", 10),
                             ("that", 8), ("my", 6), ("your", 6)])
    nadj = weighted(rng, [(0, 50), (1, 35), (2, 15)])
    adjs = rng.sample(ADJS, nadj)
    return {"kind": "np", "noun": noun, "plural": plural, "det": det,
            "num": num, "adjs": adjs}


def sample_subject(rng):
    if rng.random() < 0.25:
        return {"kind": "pron", "pron": rng.choice(PRONOUNS)}
    return sample_np(rng)


def sample_object(rng):
    if rng.random() < 0.2:
        return {"kind": "pron", "pron": rng.choice(PRONOUNS)}
    return sample_np(rng)


def sample_clause(rng):
    tense = rng.choice(["present", "past", "future"])
    transitive = rng.random() < 0.7
    verb = rng.choice(TRANSITIVE if transitive else INTRANSITIVE)
    c = {"subj": sample_subject(rng), "verb": verb, "tense": tense,
         "obj": sample_object(rng) if transitive else None,
         "pp": None, "adv": None}
    if rng.random() < 0.35:
        c["pp"] = (rng.choice(PREPS), sample_np(rng))
    if rng.random() < 0.35:
        c["adv"] = rng.choice([a for a in ADVS if a[2] in (None, tense)])
    return c


def emit_src_np(sent, np, role):
    if np["kind"] == "pron":
        np["i"] = sent.s(np["pron"][0] if role == "subj" else np["pron"][1])
        return
    if np["det"] is not None:
        np["det_i"] = sent.s(np["det"])
    if np["num"] is not None:
        np["num_i"] = sent.s(np["num"][0])
    np["adj_i"] = [sent.s(a[0]) for a in np["adjs"]]
    noun = np["noun"]
    np["noun_i"] = sent.s(noun[1] if np["plural"] else noun[0])


def emit_tgt_np(sent, np, role):
    if np["kind"] == "pron":
        p = np["pron"]
        sent.t(p[2] if role == "subj" else p[3], np["i"])
        return
    noun = np["noun"]
    det = np["det"]
    if det in AGREEING_DETS:            # agrees with the (later) noun
        sent.t(AGREEING_DETS[det][0 if noun[3] == "A" else 1], np["det_i"])
    sent.t(noun[2], np["noun_i"])
    if np["plural"]:                    # one source word -> two target words
        sent.t(PLURAL_MARK, np["noun_i"])
    for adj, i in reversed(list(zip(np["adjs"], np["adj_i"]))):
        sent.t(adj[1], i)
    if np["num"] is not None:
        sent.t(np["num"][1], np["num_i"])
    if det in POSSESSIVES:
        sent.t(POSSESSIVES[det], np["det_i"])
    # det == "a" is dropped: no target word.


def third_singular(np):
    if np["kind"] == "pron":
        return np["pron"][4]
    return not np["plural"]


def emit_src_clause(sent, c):
    emit_src_np(sent, c["subj"], "subj")
    base, sg3, past, _ = c["verb"]
    if c["tense"] == "future":
        c["verb_i"] = [sent.s("will"), sent.s(base)]
    elif c["tense"] == "past":
        c["verb_i"] = [sent.s(past)]
    else:
        c["verb_i"] = [sent.s(sg3 if third_singular(c["subj"]) else base)]
    if c["obj"] is not None:
        emit_src_np(sent, c["obj"], "obj")
    if c["pp"] is not None:
        c["prep_i"] = sent.s(c["pp"][0][0])
        emit_src_np(sent, c["pp"][1], "pp")
    if c["adv"] is not None:
        c["adv_i"] = sent.s(c["adv"][0])


def emit_tgt_clause(sent, c):
    emit_tgt_np(sent, c["subj"], "subj")
    if c["adv"] is not None:
        sent.t(c["adv"][1], c["adv_i"])
    if c["pp"] is not None:
        emit_tgt_np(sent, c["pp"][1], "pp")
        sent.t(c["pp"][0][1], c["prep_i"])
    if c["obj"] is not None:
        emit_tgt_np(sent, c["obj"], "obj")
    sent.t(c["verb"][3] + TENSE_SUFFIX[c["tense"]], *c["verb_i"])


def generate_sentence(rng):
    while True:
        clauses = [sample_clause(rng)]
        conj = None
        if rng.random() < 0.25:
            conj = rng.choice(CONJS)
            clauses.append(sample_clause(rng))
        sent = Sentence()
        emit_src_clause(sent, clauses[0])
        if conj is not None:
            conj_i = sent.s(conj[0])
            emit_src_clause(sent, clauses[1])
        if not MIN_LEN <= len(sent.src) <= MAX_LEN:
            continue
        emit_tgt_clause(sent, clauses[0])
        if conj is not None:
            sent.t(conj[1], conj_i)
            emit_tgt_clause(sent, clauses[1])
        return sent


def alignment_line(sent):
    links = sorted((i, j) for j, (_, idx) in enumerate(sent.tgt) for i in idx)
    return " ".join("%d-%d" % l for l in links)


def write_split(out_dir, name, sents):
    files = {ext: open(os.path.join(out_dir, "%s.%s" % (name, ext)), "w",
                       encoding="ascii", newline="\n")
             for ext in ("src", "tgt", "align")}
    try:
        for sent in sents:
            files["src"].write(" ".join(sent.src) + "\n")
            files["tgt"].write(" ".join(w for w, _ in sent.tgt) + "\n")
            files["align"].write(alignment_line(sent) + "\n")
    finally:
        for f in files.values():
            f.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="data/demo")
    ap.add_argument("--train", type=int, default=12000)
    ap.add_argument("--valid", type=int, default=500)
    ap.add_argument("--test", type=int, default=500)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    total = args.train + args.valid + args.test
    seen = set()
    sents = []
    while len(sents) < total:          # unique source sentences only
        sent = generate_sentence(rng)
        key = " ".join(sent.src)
        if key in seen:
            continue
        seen.add(key)
        sents.append(sent)
    rng.shuffle(sents)

    os.makedirs(args.out, exist_ok=True)
    write_split(args.out, "test", sents[:args.test])
    write_split(args.out, "valid", sents[args.test:args.test + args.valid])
    write_split(args.out, "train", sents[args.test + args.valid:])


if __name__ == "__main__":
    main()
