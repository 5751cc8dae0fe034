// nmt-serve's page in a real browser: headless Chromium (tests/browser/
// serve_page.py) types a sentence, clicks Translate and reads the DOM; the
// translation, the heatmap's tokens, weights (to the 4 decimals the page
// shows) and gray levels must be the server's, at piece and word level; with
// two named models the page lists both and translates with the one chosen.
// Screenshots, for a person to look at, land in BUILD/test-artifacts/.
// NMT_NO_BROWSER=1 skips it (a machine without Chromium, such as a GPU
// host); elsewhere a missing browser fails it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "test_util.h"

namespace {

using json = nlohmann::json;
using nmt::test::read_bytes;

// The heatmap `dom` shows (serve_page.py's level object) against the server's matrix `want`.
void expect_same_heatmap(const json& dom, const json& want, const std::string& level) {
  EXPECT_EQ(dom["source"], want["source"]) << level;
  EXPECT_EQ(dom["target"], want["target"]) << level;
  ASSERT_EQ(dom["weights"].size(), want["weights"].size()) << level;
  for (size_t t = 0; t < want["weights"].size(); ++t) {
    ASSERT_EQ(dom["weights"][t].size(), want["weights"][t].size()) << level;
    for (size_t j = 0; j < want["weights"][t].size(); ++j) {
      const double w = want["weights"][t][j].get<double>();
      EXPECT_NEAR(dom["weights"][t][j].get<double>(), w, 0.5e-4 + 1e-12) << level << " cell " << t << "," << j;
      const int g = static_cast<int>(std::lround(255 * std::min(1.0, std::max(0.0, w))));
      EXPECT_EQ(dom["colors"][t][j], "rgb(" + std::to_string(g) + ", " + std::to_string(g) + ", " + std::to_string(g) + ")")
          << level << " cell " << t << "," << j;
    }
  }
}

TEST(BrowserTest, ThePageShowsTheTranslationAndItsAttention) {
  if (std::getenv("NMT_NO_BROWSER") != nullptr) GTEST_SKIP() << "NMT_NO_BROWSER is set";
  const auto dir = nmt::test::temp_dir("browser");
  // A second model of the same shape with random weights, served as "other".
  const std::string other_path = nmt::test::random_toy_twin(dir, 7);
  auto server = nmt::test::spawn({nmt::test::bin("nmt-serve"), "-m", "toy=" + nmt::test::trained_toy_checkpoint(), "-m",
                                  "other=" + other_path, "--port", "0", "--threads", "1"},
                                 dir + "/serve.err");
  ASSERT_TRUE(nmt::test::wait_for_log(server, "listening on", 120)) << read_bytes(dir + "/serve.err");
  std::smatch m;
  const std::string log = read_bytes(dir + "/serve.err");
  ASSERT_TRUE(std::regex_search(log, m, std::regex("127\\.0\\.0\\.1:([0-9]+)")));
  const int port = std::stoi(m[1]);
  const std::string sentence = "red cat sees big dog";
  const std::string shots = std::string(NMT_BINARY_DIR) + "/test-artifacts";
  std::filesystem::create_directories(shots);
  const std::string cmd = "python3 " + nmt::test::quote(std::string(NMT_SOURCE_DIR) + "/tests/browser/serve_page.py") +
                          " " + std::to_string(port) + " " + nmt::test::quote(sentence) + " " +
                          nmt::test::quote(shots) + " 2> " + nmt::test::quote(dir + "/browser.err");
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << read_bytes(dir + "/browser.err");
  }
  ASSERT_FALSE(out.empty()) << read_bytes(dir + "/browser.err");
  const json dom = json::parse(out);
  httplib::Client c("127.0.0.1", port);
  json want[2];
  for (int w = 0; w < 2; ++w) {
    auto res = c.Post("/translate", json{{"text", {sentence}}, {"alignment", "soft"}, {"level", w ? "word" : "piece"}}.dump(),
                      "application/json");
    ASSERT_TRUE(res && res->status == 200);
    want[w] = json::parse(res->body)["translations"][0];
  }
  auto res = c.Post("/translate", json{{"text", {sentence}}, {"model", "other"}}.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  const std::string other = json::parse(res->body)["translations"][0]["text"];
  ::kill(server.pid, SIGTERM);
  EXPECT_EQ(nmt::test::wait_exit(server, 30), 0);
  EXPECT_EQ(dom["status"], "");
  EXPECT_EQ(dom["typed"], sentence);
  EXPECT_EQ(dom["translation"], want[0]["text"]);
  expect_same_heatmap(dom["pieces"], want[0]["attention"], "pieces");
  expect_same_heatmap(dom["words"], want[1]["attention"], "words");
  // Hovering the first cell names its two tokens and its weight.
  const std::string hover = dom["hover"];
  EXPECT_NE(hover.find(want[0]["attention"]["source"][0].get<std::string>()), std::string::npos) << hover;
  EXPECT_NE(hover.find(want[0]["attention"]["target"][0].get<std::string>()), std::string::npos) << hover;
  EXPECT_EQ(dom["models"], json({"toy", "other"}));
  EXPECT_TRUE(dom["model_shown"].get<bool>());
  EXPECT_NE(other, want[0]["text"].get<std::string>());  // the models differ, so the choice shows
  EXPECT_EQ(dom["second_translation"], other);
  EXPECT_GT(read_bytes(shots + "/page-pieces.png").size(), 1000u);
  EXPECT_GT(read_bytes(shots + "/page-words.png").size(), 1000u);
}

}  // namespace
