// Tests for nmt::corpus_chrf, both metrics on a realistic corpus, the intl
// and char tokenizers, exact match and sacreBLEU's output formats (BLEU
// alone, 13a and lowercasing: metrics_test.cc).
//
// Expected values come from two places:
//  * "sacreBLEU test suite" cases are copied verbatim from mjpost/sacrebleu
//    test/test_bleu.py and test/test_chrf.py (2.x versions) with the expected
//    numbers printed there, and with the settings they are printed for
//    (ChrfTest.SacreBleuTestSuiteWithItsSettings: beta 3, epsilon smoothing,
//    whitespace kept).
//  * All other values were computed with sacreBLEU 2.x's algorithm: a plain
//    Python transcription of sacrebleu/tokenizers/tokenizer_13a.py,
//    tokenizer_re.py, metrics/bleu.py, metrics/chrf.py, metrics/helpers.py,
//    metrics/base.py (corpus_score path) and utils.py (my_log, sum_of_lists)
//    from the sacreBLEU 2.x source (2.0-2.5 line: eps_smoothing chrF,
//    lru_cache 13a tokenizer), run under Python 3.11. That transcription
//    reproduces every expected value of test_bleu.py and test_chrf.py, and the
//    C++ code matched it bit for bit on ~10k randomized corpora.
#include "text/metrics.h"

#include "base/error.h"
#include "base/option_enums.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nmt::BleuOptions;
using nmt::corpus_bleu;
using nmt::corpus_chrf;
using nmt::metrics_version;
using Strings = std::vector<std::string>;

constexpr double kChrfTol = 1e-9;

// ---------------------------------------------------------------------------
// chrF

// sacreBLEU test suite (test/test_chrf.py, test_cases_effective_order). Those
// use beta=3, but in every case precision == recall, so the F-score is the
// same for the default beta=2.
TEST(ChrfTest, SacreBleuEffectiveOrderCases) {
  EXPECT_NEAR(corpus_chrf({"a"}, {"a"}).score, 100.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({""}, {"reference"}).score, 0.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"a b c"}).score, 100.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}).score, 100.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({""}, {"c"}).score, 0.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a", "b"}, {"a", "c"}).score, 50.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"aa"}, {"ab"}).score, 25.0, 1e-4);
}

// The non-trivial values of sacreBLEU's own test suite (test/test_chrf.py,
// 2.x), with the settings each group uses there.
TEST(ChrfTest, SacreBleuTestSuiteWithItsSettings) {
  // test_cases: char_order=6, word_order=0, beta=3, eps_smoothing=True.
  nmt::ChrfOptions eps3;
  eps3.beta = 3;
  eps3.eps_smoothing = true;
  EXPECT_NEAR(corpus_chrf({"aa"}, {"ab"}, eps3).score, 8.3333, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a", "b"}, {"a", "c"}, eps3).score, 8.3333, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a"}, {"a"}, eps3).score, 16.6667, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"a b c"}, eps3).score, 50.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}, eps3).score, 50.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({""}, {"reference"}, eps3).score, 0.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({" risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
                          {"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."},
                          eps3).score,
              63.361730, 1e-4);
  EXPECT_NEAR(corpus_chrf({" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
                          {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, eps3).score,
              64.1302698, 1e-4);
  EXPECT_NEAR(corpus_chrf({"Niemand hat die Absicht, eine Mauer zu errichten"},
                          {"Niemand hat die Absicht, eine Mauer zu errichten"}, eps3).score,
              100.0, 1e-4);
  // test_cases_keep_whitespace: beta=3, whitespace kept, effective order.
  nmt::ChrfOptions space3;
  space3.beta = 3;
  space3.whitespace = true;
  EXPECT_NEAR(corpus_chrf({"Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich."},
                          {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, space3).score,
              67.3481606, 1e-4);
  EXPECT_NEAR(corpus_chrf({"risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists ."},
                          {"risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."},
                          space3).score,
              65.2414427, 1e-4);
  // test_sentence_level_chrf: sentence_chrf(hyp, [ref], eps_smoothing=True), beta 2.
  nmt::ChrfOptions eps2;
  eps2.eps_smoothing = true;
  EXPECT_NEAR(corpus_chrf({"Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře."},
                          {"Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."}, eps2).score,
              39.14078509, 1e-4);
  EXPECT_NEAR(corpus_chrf({"Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři."},
                          {"A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."}, eps2).score,
              31.22557079, 1e-4);
  EXPECT_NEAR(corpus_chrf({"Lapali po dechu, jejich životy skončily dřív, než skutečně začaly."},
                          {"Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."}, eps2).score,
              57.15704367, 1e-4);
  // Signatures and names follow the settings.
  const auto c = corpus_chrf({"a"}, {"a"}, eps3);
  EXPECT_EQ(c.to_string(), "chrF3 = 16.67");
  EXPECT_EQ(c.signature(), "nrefs:1|case:mixed|eff:no|nc:6|nw:0|space:no|version:" + metrics_version());
  EXPECT_EQ(corpus_chrf({"a"}, {"a"}, space3).signature(), "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:yes|version:" + metrics_version());
}

TEST(ChrfTest, Ascii) {
  const auto c = corpus_chrf({"The cat sat on the mat."}, {"The cat is on the mat."});
  EXPECT_NEAR(c.score, 67.17273492330233, kChrfTol);
  EXPECT_EQ(c.to_string(), "chrF2 = 67.17");
  EXPECT_EQ(c.signature(), "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" + metrics_version());
  EXPECT_NEAR(corpus_chrf({"abcdefg"}, {"hijklmnop"}).score, 0.0, kChrfTol);
}

// Counting bytes instead of code points would give 64.0333 (German) and
// 62.4664 (French), so these pin the Unicode handling.
TEST(ChrfTest, GermanAccentedText) {
  // Sentence pair from sacreBLEU's test/test_chrf.py, scored with the defaults.
  const auto c = corpus_chrf({" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
                             {"Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."});
  EXPECT_NEAR(c.score, 64.818123726097, kChrfTol);
}

TEST(ChrfTest, FrenchAccentedText) {
  const auto c = corpus_chrf({"L'été dernier, nous sommes allés à la mer près de Nîmes."},
                             {"L'été passé, nous sommes allées à la plage près de Nîmes."});
  EXPECT_NEAR(c.score, 59.29316125793726, kChrfTol);
}

// Czech sentence pairs from sacreBLEU's test/test_chrf.py, scored as one
// corpus with the defaults (statistics are summed before the F-score).
TEST(ChrfTest, CzechCorpus) {
  const Strings hyps = {
      "Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
      "Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
      "Lapali po dechu, jejich životy skončily dřív, než skutečně začaly."};
  const Strings refs = {
      "Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře.",
      "A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři.",
      "Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."};
  EXPECT_NEAR(corpus_chrf(hyps, refs).score, 43.03622941164886, kChrfTol);
  EXPECT_NEAR(corpus_bleu(hyps, refs).score, 24.66242872148067, kChrfTol);
}

TEST(ChrfTest, MultiSentenceCorpus) {
  const Strings hyps = {"The president met the ministers on Monday.",
                        "Prices rose by 3.5 percent in 2019.",
                        "She didn't say anything about the plan.",
                        "The match ended 2-1 after extra time."};
  const Strings refs = {"The president met with the ministers on Monday.",
                        "Prices increased by 3.5 percent in 2019.",
                        "She did not say anything about the plan.",
                        "The game ended 2-1 after extra time."};
  EXPECT_NEAR(corpus_chrf(hyps, refs).score, 79.75716874603901, kChrfTol);
}

// ---------------------------------------------------------------------------
// A realistic 20-sentence news corpus (hand-written MT-like hypotheses).

const Strings kRealRefs = {
    "The European Central Bank left interest rates unchanged on Thursday.",
    "Officials said the new bridge would open to traffic in early 2025.",
    "More than 1,200 people attended the concert in the city's main square.",
    "The company reported a net profit of $3.5 billion for the third quarter.",
    "Heavy rain caused flooding in several villages along the river.",
    "\"We are very happy with the result,\" the coach told reporters.",
    "The museum will be closed for renovation until the end of March.",
    "Scientists have discovered a new species of frog in the rainforest.",
    "The minister resigned after the scandal was made public.",
    "Tickets for the festival sold out within two hours.",
    "The train from Munich to Zurich was delayed by 45 minutes.",
    "According to the report, unemployment fell to 4.8 percent in June.",
    "Police arrested two men suspected of stealing cars in the area.",
    "The new law will come into force on January 1.",
    "She won the gold medal in the women's 200-metre freestyle.",
    "Local residents are worried about the rising cost of housing.",
    "The talks between the two countries ended without an agreement.",
    "The hospital has hired 30 additional nurses this year.",
    "Thousands of fans welcomed the team at the airport.",
    "The film received three awards at the Venice Film Festival.",
};
const Strings kRealHyps = {
    "The European Central Bank left the interest rates unchanged on Thursday.",
    "Officials said that the new bridge will be open to traffic at the beginning of 2025.",
    "More than 1,200 people attended the concert on the main square of the city.",
    "The company reported a net profit of 3.5 billion dollars for the third quarter.",
    "Heavy rains caused floods in several villages along the river.",
    "\"We are very satisfied with the result,\" said the coach to the journalists.",
    "The museum will be closed for renovation until the end of March.",
    "Scientists discovered a new kind of frog in the rain forest.",
    "The minister resigned after the scandal became public.",
    "The tickets for the festival were sold out in two hours.",
    "The train from Munich to Zurich had a delay of 45 minutes.",
    "According to the report, the unemployment fell to 4.8 per cent in June.",
    "The police arrested two men who are suspected to have stolen cars in the region.",
    "The new law enters into force on 1 January.",
    "She won the gold medal in the 200 m freestyle of the women.",
    "Local residents are concerned about the rising costs of housing.",
    "The negotiations between both countries ended without agreement.",
    "The hospital hired 30 additional nurses this year.",
    "Thousands of fans received the team at the airport.",
    "The film got three prizes at the film festival of Venice.",
};

TEST(RealisticCorpusTest, Bleu13a) {
  const auto b = corpus_bleu(kRealHyps, kRealRefs);
  EXPECT_EQ(b.counts, (std::array<int64_t, 4>{194, 130, 86, 53}));
  EXPECT_EQ(b.totals, (std::array<int64_t, 4>{252, 232, 212, 192}));
  EXPECT_NEAR(b.score, 46.881170565135285, kChrfTol);
  EXPECT_EQ(b.to_string(),
            "BLEU = 46.88 77.0/56.0/40.6/27.6 (BP = 1.000 ratio = 1.063 hyp_len = 252 ref_len = 237)");
  EXPECT_EQ(b.signature(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + metrics_version());
}

TEST(RealisticCorpusTest, BleuLowercaseAndNoTokenizer) {
  BleuOptions lc;
  lc.lowercase = true;
  EXPECT_NEAR(corpus_bleu(kRealHyps, kRealRefs, lc).score, 48.107096334685785, kChrfTol);
  BleuOptions none;
  none.tokenize = "none";
  const auto b = corpus_bleu(kRealHyps, kRealRefs, none);
  EXPECT_NEAR(b.score, 43.975577916625085, kChrfTol);
  EXPECT_EQ(b.sys_len, 228);
  EXPECT_EQ(b.ref_len, 210);
}

TEST(RealisticCorpusTest, Chrf) {
  EXPECT_NEAR(corpus_chrf(kRealHyps, kRealRefs).score, 76.40391102247047, kChrfTol);
}

// mteval-v14 international tokenization: punctuation and symbols by Unicode
// category, so it splits scripts 13a leaves alone; a number keeps a dot or
// comma inside it and (as in mteval-v14) a final dot.
TEST(BleuTest, IntlTokenizer) {
  EXPECT_EQ(nmt::tokenize_intl("It wasn't surprising."), "It wasn ' t surprising .");
  EXPECT_EQ(nmt::tokenize_intl("Prices rose by 3.5 percent in 2019."), "Prices rose by 3.5 percent in 2019.");
  EXPECT_EQ(nmt::tokenize_intl("\u00abBonjour\u00bb, dit-il\u2026 1,000\u20ac (ca. 5%)!"),
            "\u00ab Bonjour \u00bb , dit - il \u2026 1,000 \u20ac ( ca . 5 % ) !");
  EXPECT_EQ(nmt::tokenize_intl("a..b"), "a . . b");
  EXPECT_EQ(nmt::tokenize_intl("x+y=z"), "x + y = z");
  EXPECT_EQ(nmt::tokenize_intl("\u65e5\u672c\u8a9e\u3001\u30c6\u30b9\u30c8\u3002"),
            "\u65e5\u672c\u8a9e \u3001 \u30c6\u30b9\u30c8 \u3002");
}

TEST(BleuTest, CharTokenizerAndUnknownNames) {
  BleuOptions chars;
  chars.tokenize = "char";
  // "abc" vs "abd": characters a b c / a b d -> 2/3 unigrams, 1/2 bigrams, 0 trigrams.
  const auto b = corpus_bleu({"abc"}, {"abd"}, chars);
  EXPECT_EQ(b.counts, (std::array<int64_t, 4>{2, 1, 0, 0}));
  EXPECT_EQ(b.sys_len, 3);
  // Every name nmt-translate --tokenize offers is one corpus_bleu knows.
  for (const auto& name : nmt::enum_names<nmt::BleuTokenizer>()) {
    BleuOptions o;
    o.tokenize = name;
    EXPECT_NO_THROW(corpus_bleu({"a b"}, {"a b"}, o)) << name;
  }
  BleuOptions bad;
  bad.tokenize = "moses";
  EXPECT_THROW(corpus_bleu({"a"}, {"a"}, bad), nmt::Error);
  EXPECT_EQ(nmt::unicode_major_category(U'.'), 'P');
  EXPECT_EQ(nmt::unicode_major_category(U'+'), 'S');
  EXPECT_EQ(nmt::unicode_major_category(U'7'), 'N');
  EXPECT_EQ(nmt::unicode_major_category(U'a'), 0);
  EXPECT_EQ(nmt::unicode_major_category(0x10FFFF), 0);
}

}  // namespace

TEST(ExactMatch, CountsIdenticalLines) {
  EXPECT_DOUBLE_EQ(nmt::exact_match({"a b", "c", "d"}, {"a b", "c ", "d"}), 100.0 * 2 / 3);
  EXPECT_DOUBLE_EQ(nmt::exact_match({}, {}), 0.0);
  EXPECT_THROW(nmt::exact_match({"a"}, {}), nmt::Error);
}

namespace {

using Streams = std::vector<std::vector<std::string>>;

// The README example of sacreBLEU with its two reference streams.
const Strings kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."};
const Streams kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

// chrF with several references takes, for each segment, the statistics of
// the reference with the best sentence-level chrF (sacreBLEU 2.x's
// CHRF._compute_segment_statistics), summed over the corpus. Values from a
// transcription of sacreBLEU 2.x's chrF (metrics/chrf.py, helpers.py).
TEST(MetricsTest, MultiReferenceChrfTakesEachSegmentsBestReference) {
  const auto both = nmt::corpus_chrf_multiref(kReadmeHyps, kReadmeRefs);
  EXPECT_NEAR(both.score, 59.72751782684763, kChrfTol);
  EXPECT_NEAR(corpus_chrf(kReadmeHyps, kReadmeRefs[0]).score, 50.043063606582294, kChrfTol);
  EXPECT_NEAR(corpus_chrf(kReadmeHyps, kReadmeRefs[1]).score, 51.70106133373036, kChrfTol);
  EXPECT_EQ(both.signature(), "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" + metrics_version());
  // One stream is plain chrF.
  EXPECT_EQ(nmt::corpus_chrf_multiref(kReadmeHyps, {kReadmeRefs[1]}).score,
            corpus_chrf(kReadmeHyps, kReadmeRefs[1]).score);
  EXPECT_THROW(nmt::corpus_chrf_multiref(kReadmeHyps, {}), nmt::Error);
  EXPECT_THROW(nmt::corpus_chrf_multiref(kReadmeHyps, {kReadmeRefs[0], {"one"}}), nmt::Error);
  // Exact match: equal to any reference.
  EXPECT_DOUBLE_EQ(nmt::exact_match_multiref(kReadmeHyps, kReadmeRefs), 100.0 / 3);
  EXPECT_DOUBLE_EQ(nmt::exact_match_multiref({"No one was surprised."}, {{"x"}, {"No one was surprised."}}), 100.0);
}

// As sacreBLEU does, an empty reference of a segment with others is left
// out, and the signature says the count varies ("nrefs:var").
TEST(MetricsTest, EmptyReferencesAreLeftOutAsSacreBleuLeavesThem) {
  const Strings hyps = {"the cat sat on the mat", "a dog barks loudly", "birds fly south"};
  const Streams refs = {{"the cat sat on a mat", "", "birds fly south in winter"},
                        {"a cat is on the mat", "the dog barks loud", "the birds fly south"}};
  const auto chrf = nmt::corpus_chrf_multiref(hyps, refs);
  EXPECT_NEAR(chrf.score, 76.22937526512032, kChrfTol);
  EXPECT_EQ(chrf.signature().rfind("nrefs:var|", 0), 0u) << chrf.signature();
  const auto bleu = nmt::corpus_bleu_multiref(hyps, refs);
  EXPECT_EQ(bleu.counts, (std::array<int64_t, 4>{10, 8, 4, 1}));
  EXPECT_EQ(bleu.totals, (std::array<int64_t, 4>{13, 10, 7, 4}));
  EXPECT_EQ(bleu.ref_len, 14);  // the empty reference would have made it 13
  EXPECT_NEAR(bleu.score, 50.42023677771565, kChrfTol);
  EXPECT_EQ(bleu.signature().rfind("nrefs:var|", 0), 0u) << bleu.signature();
  // With one reference an empty one is still scored, as before.
  EXPECT_EQ(corpus_bleu({"a b"}, {""}).signature().rfind("nrefs:1|", 0), 0u);
  EXPECT_EQ(corpus_chrf({"a b"}, {""}).score, 0.0);
}

// The forms `sacrebleu -f text` and `-f json` print.
TEST(MetricsTest, ScoresPrintAsSacreBleuPrintsThem) {
  const auto b = corpus_bleu({"am I am a character sequence"}, {"I am a symbol string sequence a a"});
  EXPECT_EQ(b.verbose(), "66.7/40.0/25.0/16.7 (BP = 0.717 ratio = 0.750 hyp_len = 6 ref_len = 8)");
  EXPECT_EQ(b.to_string(), "BLEU = 23.26 " + b.verbose());
  const std::string v = metrics_version();
  const std::string bleu_json =
      "{\n \"name\": \"BLEU\",\n \"score\": 23.26,\n"
      " \"signature\": \"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + v + "\",\n"
      " \"verbose_score\": \"66.7/40.0/25.0/16.7 (BP = 0.717 ratio = 0.750 hyp_len = 6 ref_len = 8)\",\n"
      " \"nrefs\": \"1\",\n \"case\": \"mixed\",\n \"eff\": \"no\",\n \"tok\": \"13a\",\n \"smooth\": \"exp\",\n"
      " \"version\": \"" + v + "\"\n}";
  EXPECT_EQ(b.to_json(), bleu_json);
  // Scores are rounded to 2 decimals and written as Python writes floats.
  const auto c = corpus_chrf({"a"}, {"a"});
  const std::string chrf_json =
      "{\n \"name\": \"chrF2\",\n \"score\": 100.0,\n"
      " \"signature\": \"nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" + v + "\",\n"
      " \"nrefs\": \"1\",\n \"case\": \"mixed\",\n \"eff\": \"yes\",\n \"nc\": \"6\",\n \"nw\": \"0\",\n"
      " \"space\": \"no\",\n \"version\": \"" + v + "\"\n}";
  EXPECT_EQ(c.to_json(), chrf_json);
  EXPECT_EQ(nmt::sacrebleu_json({bleu_json}), bleu_json);
  EXPECT_EQ(nmt::sacrebleu_json({bleu_json, chrf_json}), "[\n" + bleu_json + ",\n" + chrf_json + "\n]");
  EXPECT_NE(corpus_bleu({"x y"}, {"z w"}).to_json().find("\"score\": 0.0,"), std::string::npos);
}

}  // namespace

