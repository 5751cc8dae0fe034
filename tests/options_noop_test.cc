// Options that could not take effect where they were given are refused with
// a line naming them, not accepted and ignored: a shortlist's shape without
// the shortlist, scores appended to n-best lines that carry them already,
// heatmaps of an aligner that has no attention, per-pair files of a format
// that writes one output, and an output file that --output-dir leaves
// unwritten. Each case is also accepted once the option can take effect.
#include <gtest/gtest.h>

#include <string>

#include "base/align_options.h"
#include "base/serve_options.h"
#include "base/translate_options.h"
#include "test_util.h"

namespace {

using nmt::test::contains;
using nmt::test::error_of;

template <class Options>
std::string refusal(const Options& o) {
  return error_of([&] { o.validate(); });
}

TEST(OptionsNoopTest, TheShortlistsShapeNeedsTheShortlist) {
  nmt::StreamOptions stream;
  stream.model_paths = {"model.ckpt"};
  nmt::ServeOptions serve;
  serve.model_paths = {"model.ckpt"};
  for (const char* option : {"shortlist-best", "shortlist-frequent"}) {
    stream.given = serve.given = {option};
    EXPECT_TRUE(contains(refusal(stream), "--shortlist-best and --shortlist-frequent shape the candidates of --shortlist"))
        << option;
    EXPECT_TRUE(contains(refusal(serve), "give --shortlist")) << option;
    stream.translate.shortlist.path = serve.translate.shortlist.path = "lex.tsv";
    EXPECT_NO_THROW(stream.validate()) << option;
    EXPECT_NO_THROW(serve.validate()) << option;
    stream.translate.shortlist.path = serve.translate.shortlist.path = "";
  }
}

TEST(OptionsNoopTest, ScoresOnNBestLinesAreRefused) {
  nmt::StreamOptions stream;
  stream.model_paths = {"model.ckpt"};
  stream.scores = true;
  stream.translate.search.beam_size = 4;
  EXPECT_NO_THROW(stream.validate());  // the one best, with its score
  stream.translate.search.n_best = 2;
  EXPECT_TRUE(contains(refusal(stream), "--with-scores does nothing with --n-best"));
}

TEST(OptionsNoopTest, AlignmentOutputsThatWouldStayEmptyAreRefused) {
  nmt::AlignRunOptions ibm2;
  ibm2.aligner = nmt::Aligner::kIbm2;
  ibm2.src = "a.src";
  ibm2.tgt = "a.tgt";
  ibm2 = ibm2.resolved();  // pharaoh, the statistical aligner's format
  EXPECT_NO_THROW(ibm2.validate());
  auto heatmap = ibm2;
  heatmap.heatmap_dir = "maps";
  EXPECT_TRUE(contains(refusal(heatmap), "the ibm2 aligner gives hard links only, no attention to draw: drop --heatmap"));
  auto dir = ibm2;
  dir.output_dir = "pairs";
  EXPECT_TRUE(contains(refusal(dir), "--format pharaoh writes all its links to one output"));

  nmt::AlignRunOptions attention;
  attention.model_path = "model.ckpt";
  attention.src = "a.src";
  attention.tgt = "a.tgt";
  attention.output_dir = "pairs";  // csv, one file per pair
  EXPECT_NO_THROW(attention.validate());
  attention.heatmap_dir = "maps";
  EXPECT_NO_THROW(attention.validate());
  attention.output = "-";  // stdout named as such: nothing goes unwritten
  EXPECT_NO_THROW(attention.validate());
  attention.output = "out.csv";
  EXPECT_TRUE(contains(refusal(attention), "--output-dir writes one file per pair, and the -o file would stay unwritten"));
  attention.output_dir.clear();  // the matrices into -o, the heatmaps beside: both written
  EXPECT_NO_THROW(attention.validate());
}

}  // namespace
