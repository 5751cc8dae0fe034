// nmt-serve through the real executable on 127.0.0.1: every endpoint, the
// translations nmt-translate gives, refusals as JSON with their status
// (the body limit and unknown paths included), a client that leaves
// mid-request, many clients at once, and a clean stop on SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "test_util.h"

namespace {

using json = nlohmann::json;
using nmt::test::read_bytes;
using nmt::test::temp_dir;

// A running nmt-serve on a free port of 127.0.0.1 with the toy model.
struct Server {
  nmt::test::Child child;
  int port = 0;
  // Serves the toy model, or only what `extra` says (a config file) without `toy`.
  explicit Server(const std::string& dir, std::vector<std::string> extra = {}, bool toy = true) {
    std::vector<std::string> args = {nmt::test::bin("nmt-serve"), "--port", "0", "--threads", "1"};
    if (toy) args.insert(args.end(), {"-m", nmt::test::trained_toy_checkpoint()});
    args.insert(args.end(), extra.begin(), extra.end());
    child = nmt::test::spawn(args, dir + "/serve.err");
    if (!nmt::test::wait_for_log(child, "listening on", 120)) return;
    std::smatch m;
    const std::string log = read_bytes(child.log);
    if (std::regex_search(log, m, std::regex("listening on http://127\\.0\\.0\\.1:([0-9]+)"))) port = std::stoi(m[1]);
  }
  ~Server() {
    if (child.pid > 0) {
      ::kill(child.pid, SIGKILL);
      nmt::test::wait_exit(child, 10);
    }
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    c.set_keep_alive(true);
    return c;
  }
};

TEST(CliServeTest, EndpointsAnswerAndTranslateAsNmtTranslate) {
  const auto dir = temp_dir("cli_serve");
  Server s(dir);
  ASSERT_GT(s.port, 0) << read_bytes(dir + "/serve.err");
  auto c = s.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto models = c.Get("/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["models"][0]["checkpoints"][0]["path"], nmt::test::trained_toy_checkpoint());
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("id=\"heatmap\""), std::string::npos);
  EXPECT_EQ(page->body.find("http"), std::string::npos) << "the page fetches nothing from elsewhere";
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(json::parse(missing->body).contains("error"));

  const std::vector<std::string> lines = {"red cat sees big dog", "old fish", "blue bird runs"};
  nmt::test::write_lines(dir + "/in.txt", lines);
  const auto cli = nmt::test::run("nmt-translate", "-m " + nmt::test::quote(nmt::test::trained_toy_checkpoint()) + " -b 3",
                                  dir, dir + "/in.txt");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  auto res = c.Post("/translate", json{{"text", lines}, {"beam_size", 3}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto t = json::parse(res->body)["translations"];
  const auto want = nmt::test::lines_of(cli.out);
  ASSERT_EQ(t.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t[i]["text"], want[i]) << "line " << i;
}

// One file describes a whole system, the keys both tools read (as the
// Multi30k recipe writes its selected system's): a weighted ensemble, its beam
// rescored by a right-to-left and a channel model, and a minimum Bayes-risk
// pick. nmt-serve -c FILE answers what nmt-translate -c FILE prints.
TEST(CliServeTest, ASystemFileServesAsItTranslates) {
  const auto dir = temp_dir("cli_serve_system");
  const std::string system = dir + "/system.toml";
  nmt::test::write_lines(system, {"model = [\"" + nmt::test::trained_toy_checkpoint() + "\", \"" +
                                      nmt::test::random_toy_twin(dir, 7) + "\"]",
                                  "ensemble-weights = [3, 1]", "beam-size = 4", "length-penalty = 1.0",
                                  "r2l-model = [\"" + nmt::test::random_toy_twin(dir, 8) + "\"]", "r2l-weight = 0.5",
                                  "channel-model = [\"" + nmt::test::random_toy_twin(dir, 9) + "\"]",
                                  "channel-weight = 0.25", "r2l-length-exponent = 1.0", "mbr = \"chrf\"",
                                  "mbr-temperature = 0.5"});
  const std::vector<std::string> lines = {"red cat sees big dog", "old fish", "blue bird runs", "big red fish"};
  nmt::test::write_lines(dir + "/in.txt", lines);
  const auto cli = nmt::test::run("nmt-translate", "-c " + nmt::test::quote(system) + " --threads 1", dir, dir + "/in.txt");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_TRUE(nmt::test::contains(cli.err, "minimum Bayes risk")) << cli.err;
  Server s(dir, {"-c", system}, /*toy=*/false);
  ASSERT_GT(s.port, 0) << read_bytes(dir + "/serve.err");
  auto c = s.client();
  auto res = c.Post("/translate", json{{"text", lines}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto t = json::parse(res->body)["translations"];
  const auto want = nmt::test::lines_of(cli.out);
  ASSERT_EQ(t.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t[i]["text"], want[i]) << "line " << i;
    EXPECT_TRUE(t[i].contains("mbr") && t[i].contains("r2l_log_prob") && t[i].contains("channel_log_prob")) << t[i];
  }
}

TEST(CliServeTest, RefusalsAreJsonAndTheServerKeepsServing) {
  const auto dir = temp_dir("cli_serve_bad");
  Server s(dir, {"--max-body-bytes", "4096"});
  ASSERT_GT(s.port, 0) << read_bytes(dir + "/serve.err");
  auto c = s.client();
  const std::vector<std::pair<std::string, int>> cases = {
      {"{\"text\": ", 400}, {"{\"text\": 3}", 400}, {"{\"text\": \"\\ud800\"}", 400},
      {"{\"text\": [\"" + std::string(5000, 'a') + "\"]}", 413}};
  for (const auto& [body, status] : cases) {
    auto r = c.Post("/translate", body, "application/json");
    ASSERT_TRUE(r) << body.substr(0, 40);
    EXPECT_EQ(r->status, status) << body.substr(0, 40) << " -> " << r->body;
    EXPECT_TRUE(json::parse(r->body).contains("error")) << r->body;
  }
  auto wrong_method = c.Get("/translate");
  ASSERT_TRUE(wrong_method);
  EXPECT_GE(wrong_method->status, 400);
  // A client that sends half a request and leaves.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string half = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"text\": [\"red";
  ASSERT_EQ(::write(fd, half.data(), half.size()), static_cast<ssize_t>(half.size()));
  ::close(fd);
  auto after = c.Post("/translate", R"({"text": ["red cat"]})", "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST(CliServeTest, ManyClientsAtOnceAllGetTheirTranslations) {
  const auto dir = temp_dir("cli_serve_many");
  Server s(dir);
  ASSERT_GT(s.port, 0) << read_bytes(dir + "/serve.err");
  const std::vector<std::string> lines = {"red cat", "old fish eats", "blue bird runs", "green tree house"};
  std::vector<int> ok(16, 0);
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (size_t k = 0; k < ok.size(); ++k)
    clients.emplace_back([&, k] {
      auto c = s.client();  // 16 connections at once: more than the listen backlog httplib sets (5)
      for (int r = 0; r < 5; ++r) {
        auto res = c.Post("/translate", json{{"text", {lines[(k + r) % lines.size()]}}}.dump(), "application/json");
        if (res && res->status == 200 && json::parse(res->body)["translations"].size() == 1) {
          ++ok[k];
        } else {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("client " + std::to_string(k) + " request " + std::to_string(r) + ": " +
                             (res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error())));
        }
      }
    });
  for (auto& t : clients) t.join();
  for (size_t k = 0; k < ok.size(); ++k) EXPECT_EQ(ok[k], 5) << "client " << k;
  for (const auto& f : failures) ADD_FAILURE() << f;
}

TEST(CliServeTest, StopsCleanlyOnSigterm) {
  const auto dir = temp_dir("cli_serve_stop");
  Server s(dir);
  ASSERT_GT(s.port, 0) << read_bytes(dir + "/serve.err");
  ::kill(s.child.pid, SIGTERM);
  EXPECT_EQ(nmt::test::wait_exit(s.child, 30), 0) << read_bytes(dir + "/serve.err");
  s.child.pid = -1;
  EXPECT_NE(read_bytes(dir + "/serve.err").find("stopped"), std::string::npos);
  // A port taken by another process is refused with one line and exit 1.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto r = nmt::test::run("nmt-serve", "-m " + nmt::test::quote(nmt::test::trained_toy_checkpoint()) +
                                                 " --port " + std::to_string(ntohs(addr.sin_port)), dir);
  ::close(fd);
  nmt::test::expect_one_line_error(r, {"cannot listen", "--port"});
}

}  // namespace
