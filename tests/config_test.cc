// TOML config files: reading through the options' field lists (both key
// spellings, tables, types), errors at file:line:column with a suggestion
// for a misspelt key, the dump that reads back to the same options (doubles
// in their shortest form), and the configs shipped in configs/.
#include "base/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "base/options.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

std::string write_config(const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = nmt::test::temp_dir("config") + "/" + name;
  nmt::test::write_lines(path, lines);
  return path;
}

TEST(ConfigTest, ReadsTablesBothSpellingsAndEveryType) {
  const auto path = write_config("good.toml", {
      "# a comment",
      "output = \"runs/x\"",
      "[model]",
      "emb_dim = 128          # underscore spelling",
      "attention = \"general\"",
      "tie-embeddings = true",
      "dropout = 0",
      "[training]",
      "learning-rate = 5e-4",
      "max-epochs = 3",
      "seed = 7",
  });
  nmt::TrainOptions train;
  nmt::ModelOptions model;
  auto cfg = nmt::ConfigFile::read(path);
  cfg.apply(train);
  cfg.apply(model);
  EXPECT_NO_THROW(cfg.check_all_used());
  EXPECT_EQ(train.output_dir, "runs/x");
  EXPECT_EQ(model.emb_dim, 128);
  EXPECT_EQ(model.attention, nmt::AttentionType::kGeneral);
  EXPECT_TRUE(model.tie_embeddings);
  EXPECT_EQ(model.dropout, 0.0);  // an integer is a fine number
  EXPECT_DOUBLE_EQ(train.learning_rate, 5e-4);
  EXPECT_EQ(train.max_epochs, 3);
  EXPECT_EQ(train.seed, 7);
  EXPECT_EQ(cfg.applied().count("emb-dim"), 1u);
  EXPECT_EQ(cfg.applied().count("batch-tokens"), 0u);
}

// A run folder's config.toml written before a rename still reads: the former
// key (Field::old_name) sets the field, counts as given under the new name,
// and is reported as deprecated; the two spellings together are an error.
TEST(ConfigTest, FormerKeySpellingsReadAsTheirNewNameAndAreReported) {
  const auto path = write_config("old.toml", {"[training]", "max-batch-sentences = 7", "valid_batch_size = 9"});
  nmt::TrainOptions train;
  auto cfg = nmt::ConfigFile::read(path);
  cfg.apply(train);
  EXPECT_NO_THROW(cfg.check_all_used());
  EXPECT_EQ(train.batch_sentences, 7);
  EXPECT_EQ(train.valid_batch_sentences, 9);
  EXPECT_EQ(cfg.applied(), (std::set<std::string>{"batch-sentences", "valid-batch-sentences"}));
  EXPECT_EQ(cfg.deprecations(),
            (std::vector<std::string>{path + ":2: 'max-batch-sentences' is deprecated: use 'batch-sentences'",
                                      path + ":3: 'valid-batch-size' is deprecated: use 'valid-batch-sentences'"}));

  const auto both = write_config("both.toml", {"batch-sentences = 7", "max-batch-sentences = 8"});
  auto twice = nmt::ConfigFile::read(both);
  EXPECT_EQ(error_of([&] { twice.apply(train); }),
            both + ":2:1: max-batch-sentences: the former spelling of 'batch-sentences', which the file also gives: give it once");
}

TEST(ConfigTest, MisspeltKeyIsNamedWithItsPlaceAndASuggestion) {
  const auto path = write_config("typo.toml", {"max-epochs = 3", "", "  batch-tokenz = 2048"});
  nmt::TrainOptions train;
  auto cfg = nmt::ConfigFile::read(path);
  cfg.apply(train);
  EXPECT_EQ(error_of([&] { cfg.check_all_used(); }),
            path + ":3:3: unknown option 'batch-tokenz' (did you mean 'batch-tokens'?)");
}

TEST(ConfigTest, WrongTypesAndNamesAreRefusedWithTheirPlace) {
  nmt::TrainOptions train;
  nmt::ModelOptions model;
  auto cfg = nmt::ConfigFile::read(write_config("types.toml", {"max-epochs = \"3\""}));
  EXPECT_TRUE(contains(error_of([&] { cfg.apply(train); }), "types.toml:1:1: max-epochs: expected a whole number"));
  auto enums = nmt::ConfigFile::read(write_config("enum.toml", {"", "attention = \"bilinear\""}));
  EXPECT_TRUE(contains(error_of([&] { enums.apply(model); }),
                       "enum.toml:2:1: attention: unknown attention 'bilinear' (expected additive, dot, general, concat or none)"));
  auto twice = write_config("twice.toml", {"seed = 1", "[training]", "seed = 2"});
  EXPECT_TRUE(contains(error_of([&] { nmt::ConfigFile::read(twice); }), "twice.toml:3:1: seed is given twice (line 1)"));
}

TEST(ConfigTest, NonTomlFilesAreRefusedAtTheirPlace) {
  // The INI habit: an unquoted string is not TOML.
  const auto ini = write_config("ini.toml", {"emb-dim = 64", "attention = additive"});
  const auto msg = error_of([&] { nmt::ConfigFile::read(ini); });
  EXPECT_TRUE(contains(msg, ini + ":2:")) << msg;
  EXPECT_TRUE(contains(msg, "not valid TOML")) << msg;
  EXPECT_TRUE(contains(error_of([] { nmt::ConfigFile::read("/no/such/config.toml"); }),
                       "/no/such/config.toml: cannot read the config file"));
}

// The shape check before toml++ (ConfigFile::parse) counts the parts of
// keys only: dots in strings of every kind, comments and numbers are not
// keys, and lines are counted through multi-line strings.
TEST(ConfigTest, KeyPartsAreCountedOutsideStringsAndComments) {
  const std::string nine = "a.b.c.d.e.f.g.h.i";
  const std::vector<std::string> texts = {
      "x = \"" + nine + "\"", "x = '" + nine + "'", "x = \"q\\\"." + nine + "\"", "x = \"\"\"\n" + nine + "\n\"\"\"",
      "x = '''" + nine + "'''", "x = \"\"\"\"" + nine + "\"\"\"\"", "# " + nine, "x = [1.5, 2.5e3, -0.25]",
      "t = 1979-05-27T07:32:00.999-07:00", "[a.b.c.d.e.f.g.h]\n" + std::string("i.j.k.l.m.n.o.p = 1"),
      "x = \"\"\"a\\\n" + nine + "\"\"\""};
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    try {
      nmt::ConfigFile::parse(text + "\n", "ok.toml");
    } catch (const nmt::Error& e) {  // a date is no option's type: toml++ read it
      EXPECT_TRUE(contains(e.what(), "ok.toml:1:")) << e.what();
      EXPECT_FALSE(contains(e.what(), "dotted parts")) << e.what();
    }
  }
  EXPECT_EQ(error_of([&] { nmt::ConfigFile::parse("s = \"\"\"x\ny\"\"\"\n[" + nine + "]\n", "t.toml"); }),
            "t.toml:3: table header with 9 dotted parts; nmt's config keys have at most 8 (its options need a "
            "[table] and a key)");
  EXPECT_EQ(error_of([&] { nmt::ConfigFile::parse("s = '''\n\n'''\nx = { y = 1, \"q\" . " + nine + " = 2 }\n", "t.toml"); }),
            "t.toml:4: dotted key with 10 dotted parts; nmt's config keys have at most 8 (its options need a "
            "[table] and a key)");
  const std::string key(257, 'k');
  EXPECT_EQ(error_of([&] { nmt::ConfigFile::parse("x = 1\n" + key + " = 1\n", "t.toml"); }),
            "t.toml:2: key of 257 bytes; nmt's config keys have at most 256 (its option names are far shorter)");
  EXPECT_NO_THROW(nmt::ConfigFile::parse("x = \"" + std::string(5000, 'v') + "\"\n", "ok.toml"));  // a value, not a key
}

TEST(ConfigTest, DumpReadsBackToTheSameOptions) {
  nmt::TrainOptions train;
  nmt::TokenizerOptions tok;
  nmt::ModelOptions model;
  train.train_src = "a \"quoted\" path\\with\\backslashes.en";
  train.learning_rate = 0.0003;
  train.max_minutes = 1.5;
  train.stop_metric = nmt::StopMetric::kChrf;
  train.seed = 123456789012ULL;
  tok.shared = true;
  model.decoder = nmt::DecoderType::kCgru;
  model.dropout = 0.1;
  train.clip_norm = 0.1 + 0.2;    // 0.30000000000000004: takes all 17 digits
  train.adam_beta2 = 1.0 / 3;
  train.weight_decay = 2;         // a whole number stays a TOML float
  train.valid_src = "tab\there";  // a control character, escaped
  const std::string dump = nmt::ConfigWriter().add(train).add(tok).add(model).str();
  // Each double in the shortest form that reads back to it.
  for (const char* line : {"dropout = 0.1\n", "learning-rate = 0.0003\n", "max-minutes = 1.5\n", "min-lr = 1e-05\n",
                           "clip-norm = 0.30000000000000004\n", "weight-decay = 2.0\n", "valid-src = \"tab\\there\"\n"})
    EXPECT_TRUE(contains(dump, line)) << line << " missing from:\n" << dump;
  EXPECT_FALSE(contains(dump, "0.10000000000000001")) << dump;
  const auto path = write_config("dump.toml", {dump});
  nmt::TrainOptions train2;
  nmt::TokenizerOptions tok2;
  nmt::ModelOptions model2;
  auto cfg = nmt::ConfigFile::read(path);
  cfg.apply(train2);
  cfg.apply(tok2);
  cfg.apply(model2);
  cfg.check_all_used();
  EXPECT_EQ(nmt::ConfigWriter().add(train2).add(tok2).add(model2).str(), dump);
  EXPECT_EQ(train2.train_src, train.train_src);
  EXPECT_EQ(train2.seed, train.seed);
  EXPECT_EQ(model2.decoder, nmt::DecoderType::kCgru);
  EXPECT_EQ(model2.dropout, model.dropout);
  EXPECT_EQ(train2.clip_norm, train.clip_norm);
  EXPECT_EQ(train2.adam_beta2, train.adam_beta2);
  EXPECT_EQ(train2.valid_src, train.valid_src);
  EXPECT_TRUE(contains(dump, "[model]")) << dump;
}

// A list of numbers (nmt-translate's ensemble-weights): an array of numbers,
// whole or not, or one number; written back as an array of floats.
TEST(ConfigTest, ArraysOfNumbersReadAndWriteBack) {
  nmt::StreamOptions opt;
  auto cfg = nmt::ConfigFile::read(write_config("weights.toml", {"ensemble-weights = [2, 0.5, 1e-3]"}));
  cfg.apply(opt);
  EXPECT_EQ(opt.ensemble_weights, (std::vector<double>{2, 0.5, 1e-3}));
  const std::string dump = nmt::ConfigWriter().add(opt).str();
  EXPECT_TRUE(contains(dump, "ensemble-weights = [2.0, 0.5, 0.001]\n")) << dump;
  nmt::StreamOptions back;
  nmt::ConfigFile::read(write_config("weights-back.toml", {dump})).apply(back);
  EXPECT_EQ(back.ensemble_weights, opt.ensemble_weights);
  nmt::StreamOptions one;
  nmt::ConfigFile::read(write_config("weight.toml", {"ensemble-weights = 3"})).apply(one);
  EXPECT_EQ(one.ensemble_weights, (std::vector<double>{3}));
  auto strings = nmt::ConfigFile::read(write_config("strings.toml", {"ensemble-weights = [\"2\"]"}));
  EXPECT_TRUE(contains(error_of([&] { strings.apply(opt); }),
                       "strings.toml:1:1: ensemble-weights: expected a number or an array of numbers"));
  const auto mixed = write_config("mixed.toml", {"ensemble-weights = [2, \"x\"]"});
  EXPECT_TRUE(contains(error_of([&] { nmt::ConfigFile::read(mixed); }), "ensemble-weights: expected an array of numbers"));
  auto numbers = nmt::ConfigFile::read(write_config("numbers.toml", {"model = [1, 2]"}));
  EXPECT_TRUE(contains(error_of([&] { numbers.apply(opt); }), "model: expected a string or an array of strings"));
}

// "did you mean": a near spelling, or the first words of a longer name.
TEST(ConfigTest, NearestNameSuggestsSlipsAndLeadingWords) {
  const std::vector<std::string> names = {"beam-size", "max-epochs", "max-steps", "batch-tokens", "model"};
  EXPECT_EQ(nmt::nearest_name("beam", names), "beam-size");
  EXPECT_EQ(nmt::nearest_name("max-epoch", names), "max-epochs");
  EXPECT_EQ(nmt::nearest_name("batch-tokenz", names), "batch-tokens");
  EXPECT_EQ(nmt::nearest_name("modle", names), "model");
  EXPECT_EQ(nmt::nearest_name("frobnicate", names), "");
  EXPECT_EQ(nmt::nearest_name("be", names), "");  // too little of a name to guess from
}

// Every config shipped in configs/ reads into nmt-train's options without an
// unknown key, and its values pass the checks a run makes.
TEST(ConfigTest, ShippedConfigsAreValid) {
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(NMT_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".toml") continue;
    seen.insert(entry.path().filename().string());
    SCOPED_TRACE(entry.path().string());
    nmt::TrainOptions train;
    nmt::TokenizerOptions tok;
    nmt::ModelOptions model;
    auto cfg = nmt::ConfigFile::read(entry.path().string());
    cfg.apply(train);
    cfg.apply(tok);
    cfg.apply(model);
    EXPECT_NO_THROW(cfg.check_all_used());
    if (train.train_src.empty() && train.train_tsv.empty()) {  // data paths come from the command line
      train.train_src = "train.en";
      train.train_tgt = "train.de";
    }
    EXPECT_NO_THROW(train.validate());
    EXPECT_NO_THROW(tok.validate());
    model.src_vocab = model.tgt_vocab = tok.vocab_size;
    EXPECT_NO_THROW(model.validate());
  }
  for (const char* name : {"small.toml", "multi30k-en-de.toml", "large.toml"}) EXPECT_EQ(seen.count(name), 1u) << name;
}

// The Multi30k recipe is one recipe for both pairs: en-fr's config is
// en-de's but for its output folder (and the data its command line names).
TEST(ConfigTest, Multi30kConfigsDifferOnlyInTheirOutputFolder) {
  auto dump = [](const std::string& pair) {
    nmt::TrainOptions train;
    nmt::TokenizerOptions tok;
    nmt::ModelOptions model;
    auto cfg = nmt::ConfigFile::read(std::string(NMT_SOURCE_DIR) + "/configs/multi30k-" + pair + ".toml");
    cfg.apply(train);
    cfg.apply(tok);
    cfg.apply(model);
    EXPECT_EQ(train.output_dir, "runs/multi30k-" + pair);
    train.output_dir.clear();
    return nmt::ConfigWriter().add(train).add(tok).add(model).str();
  };
  EXPECT_EQ(dump("en-fr"), dump("en-de"));
}

// A run folder's config.toml stores every path absolute (FieldFlag kPath),
// so that it reads the same files from any folder; other options are kept.
TEST(ConfigTest, PathsAreMadeAbsoluteForARunFolder) {
  const std::string cwd = std::filesystem::current_path().string();
  nmt::TrainOptions train;
  train.train_src = "data/train.en";
  train.valid_tgt = "./data/./valid.de";
  train.output_dir = "runs/x/";
  train.train_tsv = "-";
  train.guided_alignment = "/abs/links.txt";
  train.learning_rate = 0.5;
  train.kd_teachers = {"runs/t1/best.ckpt", "/abs/t2.ckpt"};  // a list of paths, each made absolute
  nmt::make_paths_absolute(train);
  EXPECT_EQ(train.kd_teachers, (std::vector<std::string>{cwd + "/runs/t1/best.ckpt", "/abs/t2.ckpt"}));
  EXPECT_EQ(train.train_src, cwd + "/data/train.en");
  EXPECT_EQ(train.valid_tgt, cwd + "/data/valid.de");
  EXPECT_EQ(train.output_dir, cwd + "/runs/x");
  EXPECT_EQ(train.train_tsv, "-");  // stdin stays stdin
  EXPECT_EQ(train.valid_src, "");   // unset stays unset
  EXPECT_EQ(train.guided_alignment, "/abs/links.txt");
  EXPECT_EQ(train.learning_rate, 0.5);
  nmt::TokenizerOptions tok;
  tok.src_model = "spm/src.model";
  tok.model_type = "bpe";  // a string, not a path
  nmt::make_paths_absolute(tok);
  EXPECT_EQ(tok.src_model, cwd + "/spm/src.model");
  EXPECT_EQ(tok.model_type, "bpe");
}

}  // namespace
