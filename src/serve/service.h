// What nmt-serve answers, apart from the network: a request's body in, a
// status and a JSON body out (serve/server.h puts it on HTTP). POST
// /translate, GET /health and GET /models; every refusal is a JSON object
// {"error": "..."} with the status that fits (400 malformed JSON or options,
// 413 too large, 503 overloaded or past its deadline, 500 a failure of ours).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/serve_options.h"
#include "model/checkpoint.h"
#include "serve/batcher.h"
#include "translate/translator.h"

namespace nmt {

// One HTTP answer.
struct HttpReply {
  int status = 200;
  std::string body;         // JSON (application/json)
  int64_t retry_after = 0;  // seconds for a Retry-After header (503); 0: none
};

// {"error": message} with `status`.
HttpReply error_reply(int status, const std::string& message, int64_t retry_after = 0);

class Service {
 public:
  // Loads the models of `opt` (ServeOptions::served_models(): each a
  // checkpoint or an ensemble, under its name) on its device and starts a
  // batcher per model. Throws nmt::UsageError for bad options, nmt::Error
  // when a model cannot be loaded.
  explicit Service(const ServeOptions& opt);
  ~Service();

  // POST /translate with a body such as
  //   {"text": ["a sentence", ...], "model": "NAME", "beam_size": 5, "n_best": 1,
  //    "alignment": "none|hard|soft", "level": "piece|word"}
  // ("text" may be one string; "model" defaults to the first model).
  // Answers {"model": NAME, "translations": [{"text", "score", "log_prob",
  // "n_best" (with n_best > 1), "alignment" (hard or soft: word links
  // "i-j ..." as nmt-align --format pharaoh prints them), "attention" (soft:
  // {"source", "target", "weights"}, rows summing to 1, at piece or word
  // level, as nmt-align's CSV)}]} in the order of "text". Never throws: a
  // refusal or failure is a reply with its status.
  HttpReply translate(const std::string& body);
  // GET /health: {"status": "ok", "queued_sentences": N} (N over all models).
  HttpReply health() const;
  // GET /models: {"default": NAME, "models": [{"name", "ensemble",
  // "checkpoints": [each one's path, step, vocabulary sizes and options]}]}.
  HttpReply models() const;
  // Stops the batchers once they have answered what they hold.
  void stop();

 private:
  struct Model;
  struct Call;
  // The request of `body`, checked; throws HttpError (service.cc) for a refusal.
  Call parse(const std::string& body) const;
  HttpReply answer(const Call& call, const BatchReply& reply) const;

  ServeOptions opt_;
  std::vector<std::unique_ptr<Model>> models_;  // in the order of -m; the first answers requests naming none
  std::string models_json_;
};

}  // namespace nmt
