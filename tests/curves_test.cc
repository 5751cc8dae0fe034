// The training-curves picture: metrics.jsonl lines in (read as JSON),
// well-formed SVG out, with one line per series that has points and a note
// where none has; the learning rate as steps in the order of the lines,
// epoch ends and the best checkpoint marked.
#include "train/curves.h"

#include <expat.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.h"

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

// The elements of `svg` named `name` whose class is `css`.
std::vector<nmt::test::SvgElement> with_class(const std::string& svg, const std::string& name, const std::string& css) {
  std::vector<nmt::test::SvgElement> out;
  for (auto& e : nmt::test::svg_elements(svg))
    if (e.name == name && e.attrs.count("class") && e.attrs.at("class") == css) out.push_back(e);
  return out;
}

// The learning-rate line's points (SVG coordinates: y grows downwards).
std::vector<std::pair<double, double>> rate_points(const std::string& svg) {
  const auto lines = with_class(svg, "polyline", "learning-rate");
  EXPECT_EQ(lines.size(), 1u);
  return lines.empty() ? std::vector<std::pair<double, double>>{} : nmt::test::svg_points(lines[0].attrs.at("points"));
}

std::string train_line(int step, int epoch, double lr) {
  return "{\"type\":\"train\",\"step\":" + std::to_string(step) + ",\"epoch\":" + std::to_string(epoch) +
         ",\"train_loss\":3,\"train_ppl\":20,\"lr\":" + std::to_string(lr) + ",\"tgt_tokens_per_s\":900,\"elapsed\":1}\n";
}
std::string valid_line(int step, int epoch, double lr, double bleu, bool best) {
  return "{\"type\":\"valid\",\"step\":" + std::to_string(step) + ",\"epoch\":" + std::to_string(epoch) +
         ",\"valid_nll\":3,\"valid_ppl\":20,\"bleu\":" + std::to_string(bleu) + ",\"chrf\":30,\"exact_match\":0,\"lr\":" +
         std::to_string(lr) + ",\"elapsed\":2,\"new_best\":" + (best ? "true" : "false") + "}\n";
}

// The run of the report: --max-steps 60 --valid-every 30, the rate halved at
// step 30. The train line at 30 (old rate) comes before the valid line at 30
// (new rate); sorting the pairs drew 0.001 -> 0.0005 -> 0.001 -> 0.0005.
TEST(CurvesTest, TheLearningRateIsAStepFunctionInTheOrderOfTheLines) {
  std::istringstream in(train_line(10, 1, 0.001) + train_line(20, 1, 0.001) + train_line(30, 1, 0.001) +
                        valid_line(30, 1, 0.0005, 10, true) + train_line(40, 2, 0.0005) + train_line(50, 2, 0.0005) +
                        train_line(60, 2, 0.0005) + valid_line(60, 2, 0.00025, 9, false));
  const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "decay");
  const auto pts = rate_points(svg);
  ASSERT_GE(pts.size(), 8u);
  int drops = 0;
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_GE(pts[i].first, pts[i - 1].first) << "point " << i << " goes back in steps";
    EXPECT_GE(pts[i].second, pts[i - 1].second) << "point " << i << ": the rate goes back up";
    // A step function: each segment is horizontal or vertical.
    EXPECT_TRUE(pts[i].first == pts[i - 1].first || pts[i].second == pts[i - 1].second) << "point " << i;
    drops += pts[i].second > pts[i - 1].second;
  }
  EXPECT_EQ(drops, 2);  // at step 30 and at step 60
}

// A run resumed from an older last.ckpt logs steps again: the later lines
// replace the ones past their step, so the lines never go back in steps.
TEST(CurvesTest, LinesOfAResumedRunReplaceTheOnesPastThem) {
  std::istringstream in(train_line(10, 1, 0.002) + valid_line(10, 1, 0.002, 5, true) + train_line(20, 1, 0.002) +
                        train_line(30, 1, 0.002) +  // killed here; last.ckpt holds step 10
                        train_line(20, 1, 0.001) + train_line(30, 1, 0.001) + train_line(40, 1, 0.001));
  const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "resumed");
  const auto pts = rate_points(svg);
  ASSERT_FALSE(pts.empty());
  for (size_t i = 1; i < pts.size(); ++i) EXPECT_GE(pts[i].first, pts[i - 1].first) << "point " << i;
  // The steps 20 and 30 of the killed run are gone: one drop, from 0.002 to 0.001 at step 20.
  int drops = 0;
  for (size_t i = 1; i < pts.size(); ++i) drops += pts[i].second != pts[i - 1].second;
  EXPECT_EQ(drops, 1);
  // The training loss has one point per step: 10, 20, 30 and 40.
  const auto loss = with_class(svg, "polyline", "train-loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(nmt::test::svg_points(loss[0].attrs.at("points")).size(), 4u);
}

// A constant rate gets an axis around its value (half of it either side),
// with labels that tell the ticks apart.
TEST(CurvesTest, AConstantRateGetsAnAxisAroundItsValue) {
  for (const auto& [lr, lo_label, mid_label] :
       std::vector<std::tuple<double, std::string, std::string>>{{0.001, "0.0006", "0.0010"},
                                                                 {1e-5, "6.0e-06", "1.0e-05"},
                                                                 {0.3, "0.20", "0.30"}}) {
    std::istringstream in(train_line(10, 1, lr) + train_line(20, 1, lr) + train_line(30, 1, lr));
    const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "constant");
    std::vector<std::string> labels;
    for (const auto& e : nmt::test::svg_elements(svg))
      if (e.name == "text") labels.push_back(e.text);
    for (const auto& want : {lo_label, mid_label})
      EXPECT_NE(std::find(labels.begin(), labels.end(), want), labels.end()) << "lr " << lr << ": no tick " << want;
    // One flat line.
    const auto pts = rate_points(svg);
    ASSERT_FALSE(pts.empty());
    for (const auto& p : pts) EXPECT_EQ(p.second, pts.front().second);
  }
}

TEST(CurvesTest, EpochEndsAndTheBestCheckpointAreMarked) {
  std::istringstream in(train_line(10, 1, 0.001) + valid_line(15, 1, 0.001, 10, true) + train_line(20, 2, 0.001) +
                        valid_line(30, 2, 0.001, 12, true) + train_line(40, 3, 0.001) +
                        valid_line(45, 3, 0.001, 11, false) + train_line(50, 4, 0.001));
  const std::string svg = nmt::training_curves_svg(nmt::read_metrics(in), "marks");
  // Three epoch ends (after steps 15, 30 and 45), in each of the four panels.
  const auto ends = with_class(svg, "line", "epoch-end");
  ASSERT_EQ(ends.size(), 12u);
  EXPECT_NE(svg.find("end of epoch 2 (step 30)"), std::string::npos);
  // best.ckpt: the last validation with new_best, on the scores panel only.
  const auto best = with_class(svg, "line", "best-checkpoint");
  ASSERT_EQ(best.size(), 1u);
  const auto label = with_class(svg, "text", "best-checkpoint-label");
  ASSERT_EQ(label.size(), 1u);
  EXPECT_EQ(label[0].text, "best.ckpt (step 30)");
  // No validation says new_best (files written before it existed): no marker.
  std::istringstream old(train_line(10, 1, 0.001) + valid_line(10, 1, 0.001, 10, false));
  EXPECT_TRUE(with_class(nmt::training_curves_svg(nmt::read_metrics(old), "old"), "line", "best-checkpoint").empty());
}

// The reader is a JSON parser: spacing, key order, nesting and strings that
// look like keys do not fool it; what is not a JSON object with a string
// type and a numeric step is skipped.
TEST(CurvesTest, MetricsAreReadAsJson) {
  std::istringstream in(
      "{ \"step\" : 7, \"type\" : \"train\", \"extra\": {\"lr\": 9}, \"note\": \"\\\"lr\\\":8\", \"lr\": 0.002 }\n"
      "{\"type\":\"valid\",\"step\":8,\"bleu\":null,\"chrf\":\"12\",\"new_best\":true}\n"
      "[1, 2]\n"
      "\"a string\"\n"
      "{\"type\":1,\"step\":2}\n"
      "{\"type\":\"train\"}\n"
      "{\"type\":\"train\",\"step\":\"3\"}\n"
      "{\"type\":\"train\",\"step\":9,\"lr\":\n"
      "\n");
  const auto points = nmt::read_metrics(in);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].type, "train");
  EXPECT_EQ(points[0].step, 7);
  EXPECT_EQ(points[0].lr, 0.002);
  EXPECT_TRUE(std::isnan(points[0].epoch));
  EXPECT_EQ(points[1].type, "valid");
  EXPECT_TRUE(std::isnan(points[1].bleu));  // null
  EXPECT_TRUE(std::isnan(points[1].chrf));  // a string is not a number
  EXPECT_TRUE(points[1].new_best);
  EXPECT_FALSE(points[0].new_best);
}

}  // namespace
