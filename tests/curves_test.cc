// The training-curves picture: metrics.jsonl lines in, well-formed SVG out,
// with one line per series that has points and a note where none has.
#include "train/curves.h"

#include <expat.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

namespace {

struct Elements {
  int polylines = 0, circles = 0;
};

// Parses `svg` as XML; counts polylines and circles.
Elements parse_svg(const std::string& svg) {
  Elements e;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &e);
  XML_SetStartElementHandler(p, [](void* data, const XML_Char* name, const XML_Char**) {
    auto* c = static_cast<Elements*>(data);
    if (std::string(name) == "polyline") ++c->polylines;
    if (std::string(name) == "circle") ++c->circles;
  });
  const bool ok = XML_Parse(p, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(ok) << XML_ErrorString(XML_GetErrorCode(p)) << " at line " << XML_GetCurrentLineNumber(p);
  XML_ParserFree(p);
  return e;
}

const char* kMetrics =
    "{\"type\":\"train\",\"step\":10,\"epoch\":1,\"train_loss\":5.5,\"train_ppl\":244.7,\"lr\":0.001,"
    "\"tgt_tokens_per_s\":1500,\"elapsed\":3}\n"
    "{\"type\":\"train\",\"step\":20,\"epoch\":1,\"train_loss\":4.25,\"train_ppl\":70.1,\"lr\":0.001,"
    "\"tgt_tokens_per_s\":1510,\"elapsed\":6}\n"
    "not json at all\n"
    "{\"type\":\"valid\",\"step\":20,\"epoch\":1,\"valid_nll\":4.0,\"valid_ppl\":54.6,\"bleu\":12.5,\"chrf\":30.25,"
    "\"exact_match\":0,\"lr\":0.001,\"elapsed\":8}\n"
    "{\"type\":\"train\",\"step\":30,\"epoch\":2,\"train_loss\":3.5,\"train_ppl\":33.1,\"lr\":0.0005,"
    "\"tgt_tokens_per_s\":1490,\"elapsed\":11}\n"
    "{\"type\":\"valid\",\"step\":30,\"epoch\":2,\"valid_nll\":3.5,\"valid_ppl\":33.1,\"bleu\":20,\"chrf\":41,"
    "\"exact_match\":1,\"lr\":0.0005,\"elapsed\":13}\n"
    "{\"type\":\"average\",\"step\":30,\"checkpoints\":2,\"valid_nll\":3.4,\"valid_ppl\":30,\"bleu\":21,\"chrf\":42,"
    "\"exact_match\":1}\n";

TEST(CurvesTest, ReadsTheFieldsOfEachKindOfLine) {
  std::istringstream in(kMetrics);
  const auto points = nmt::read_metrics(in);
  ASSERT_EQ(points.size(), 6u);  // the line that is not JSON is skipped
  EXPECT_EQ(points[0].type, "train");
  EXPECT_EQ(points[0].step, 10);
  EXPECT_EQ(points[1].train_loss, 4.25);
  EXPECT_EQ(points[1].tokens_per_s, 1510);
  EXPECT_TRUE(std::isnan(points[1].bleu));
  EXPECT_EQ(points[2].type, "valid");
  EXPECT_EQ(points[2].valid_nll, 4.0);
  EXPECT_EQ(points[2].chrf, 30.25);
  EXPECT_TRUE(std::isnan(points[2].train_loss));
  EXPECT_EQ(points[3].lr, 0.0005);
  EXPECT_EQ(points[5].type, "average");
  EXPECT_EQ(points[5].bleu, 21);
}

TEST(CurvesTest, DrawsEverySeriesThatHasPoints) {
  std::istringstream in(kMetrics);
  const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "run <1>");
  const auto e = parse_svg(svg);
  // Lines: training loss, validation loss, BLEU, chrF, learning rate, speed.
  EXPECT_EQ(e.polylines, 6);
  // Marks: 2 validation losses, 2 BLEU, 2 chrF, and the average's BLEU and chrF.
  EXPECT_EQ(e.circles, 8);
  EXPECT_NE(svg.find("run &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("no data yet"), std::string::npos);
}

TEST(CurvesTest, PanelsWithoutPointsSaySo) {
  std::istringstream in(
      "{\"type\":\"train\",\"step\":5,\"epoch\":1,\"train_loss\":2,\"train_ppl\":7.4,\"lr\":0.1,"
      "\"tgt_tokens_per_s\":100,\"elapsed\":1}\n");
  const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "no validation");
  const auto e = parse_svg(svg);
  EXPECT_EQ(e.polylines, 0);  // one point a series: a mark, no line
  EXPECT_EQ(e.circles, 3);    // training loss, learning rate, speed
  EXPECT_NE(svg.find("no data yet"), std::string::npos);  // validation scores
  parse_svg(nmt::training_curves_svg({}, "empty"));
}

}  // namespace
