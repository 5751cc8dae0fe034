// nmt-serve's answers (service.h): request parsing and checks, the batcher
// call, and the JSON of translations, links and attention.
#include "serve/service.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "model/device.h"
#include "text/alignment.h"
#include "tools/align.h"
#include "translate/rescorer.h"

namespace nmt {
namespace {

using json = nlohmann::json;

// A refusal: the status and message of an error_reply().
struct HttpError {
  int status;
  std::string message;
};

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The integer field `key` of `j`, or `fallback` when absent; 400 unless in [lo, hi].
int64_t int_field(const json& j, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number_integer())
    throw HttpError{400, std::string("'") + key + "' must be an integer"};
  const auto v = it->get<int64_t>();
  if (v < lo || v > hi)
    throw HttpError{400, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                             std::to_string(hi) + ", got " + std::to_string(v)};
  return v;
}

// The string field `key` of `j`, one of `allowed` (the first when absent); 400 otherwise.
std::string choice_field(const json& j, const char* key, const std::vector<std::string>& allowed) {
  auto it = j.find(key);
  if (it == j.end()) return allowed.front();
  std::string names;
  for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
  if (!it->is_string()) throw HttpError{400, std::string("'") + key + "' must be one of " + names};
  const auto v = it->get<std::string>();
  for (const auto& a : allowed)
    if (v == a) return v;
  throw HttpError{400, std::string("'") + key + "' must be one of " + names + ", got '" + v + "'"};
}

// The request's minimum Bayes-risk pick: "mbr" ("none", "bleu" or "chrf")
// and "mbr_temperature" (a number in [0.001, 1000]), as nmt-translate's
// --mbr and --mbr-temperature; without "mbr", the server's `fallback`
// (--mbr) where the beam is 2 or more, else none; without
// "mbr_temperature", the server's. 400 for anything else, for "mbr" with a
// beam of 1, or for "mbr_temperature" where no MBR picks.
MbrOptions mbr_fields(const json& j, int64_t beam_size, const MbrOptions& fallback) {
  MbrOptions mbr;
  mbr.temperature = fallback.temperature;
  if (j.contains("mbr"))
    mbr.utility = parse_enum<MbrUtility>(choice_field(j, "mbr", {"none", "bleu", "chrf"}));
  else if (beam_size > 1)
    mbr.utility = fallback.utility;
  if (auto t = j.find("mbr_temperature"); t != j.end()) {
    if (!mbr.enabled())
      throw HttpError{400, "'mbr_temperature' weighs the hypotheses of 'mbr': give 'mbr'" +
                               std::string(fallback.enabled() && !j.contains("mbr") ? " (or a 'beam_size' of 2 or more)"
                                                                                     : "")};
    if (!t->is_number() || !(t->get<double>() >= 1e-3 && t->get<double>() <= 1e3))
      throw HttpError{400, "'mbr_temperature' must be a number between 0.001 and 1000"};
    mbr.temperature = t->get<double>();
  }
  if (mbr.enabled() && beam_size < 2)
    throw HttpError{400, "'mbr' picks each translation from the beam: give 'beam_size' 2 or more"};
  return mbr;
}

json matrix_json(const AttentionMatrix& m) {
  return json{{"source", m.src_tokens}, {"target", m.tgt_tokens}, {"weights", m.weights}};
}

}  // namespace

// One named model: its checkpoints (several: an ensemble), the translator
// over them and the batcher that alone uses it.
struct Service::Model {
  std::string name;
  std::vector<LoadedModel> members;
  std::unique_ptr<Translator> translator;
  std::unique_ptr<Rescorer> rescorer;  // null: the beam is not rescored
  std::unique_ptr<Batcher> batcher;
};

// A checked request.
struct Service::Call {
  const Model* model = nullptr;  // the model it names, or the first
  BatchRequest request;
  std::string alignment = "none";  // none, hard, soft
  bool words = false;              // soft attention at word level
};

HttpReply error_reply(int status, const std::string& message, int64_t retry_after) {
  return HttpReply{status, dump(json{{"error", message}}) + "\n", retry_after};
}

Service::Service(const ServeOptions& opt) : opt_(opt.resolved()) {
  opt_.validate();
  const auto device = start_runtime(opt_.runtime);
  // A gathered call holds a few of the translator's batches, which it runs side by side.
  const int64_t gather = std::max<int64_t>(opt_.translate.batch_sentences, opt_.max_sentences);
  json listed = json::array();
  for (const auto& served : opt_.served_models()) {
    auto model = std::make_unique<Model>();
    model->name = served.name;
    json checkpoints = json::array();
    for (const auto& path : served.paths) {
      model->members.push_back(load_checkpoint(path, device));
      const auto& m = model->members.back();
      json options = json::object();
      std::istringstream lines(m.options.serialize());
      for (std::string line; std::getline(lines, line);)
        if (const auto eq = line.find('='); eq != std::string::npos) options[line.substr(0, eq)] = line.substr(eq + 1);
      checkpoints.push_back(json{{"path", path},
                                 {"step", m.meta.step},
                                 {"src_vocab", m.src_tok.vocab_size()},
                                 {"tgt_vocab", m.tgt_tok.vocab_size()},
                                 {"options", options}});
    }
    // Weights and rescoring belong to the one served model (validate()).
    json entry{{"name", served.name}, {"ensemble", served.paths.size() > 1}, {"checkpoints", checkpoints}};
    if (!opt_.ensemble_weights.empty()) entry["ensemble_weights"] = opt_.ensemble_weights;
    model->translator = std::make_unique<Translator>(model->members, served.paths, opt_.ensemble_weights);
    model->rescorer = load_rescorer(opt_.rescore, device, opt_.translate.search.beam_size);
    if (model->rescorer != nullptr) {
      const auto& r = opt_.rescore;
      entry["rescoring"] = json{{"r2l_models", r.r2l_models},
                                {"channel_models", r.channel_models},
                                {"r2l_weight", r.r2l_models.empty() ? 0.0 : r.r2l_weight},
                                {"channel_weight", r.channel_models.empty() ? 0.0 : r.channel_weight},
                                {"length_exponent", r.length_exponent}};
    }
    listed.push_back(std::move(entry));
    model->batcher = std::make_unique<Batcher>(*model->translator, model->rescorer.get(), opt_.translate, gather,
                                               opt_.queue_sentences, std::chrono::milliseconds(opt_.batch_wait_ms));
    models_.push_back(std::move(model));
  }
  json mbr = nullptr;
  if (opt_.mbr.enabled()) mbr = json{{"utility", enum_name(opt_.mbr.utility)}, {"temperature", opt_.mbr.temperature}};
  models_json_ = dump(json{{"default", models_.front()->name}, {"models", listed}, {"mbr", mbr}}) + "\n";
}

Service::~Service() { stop(); }

void Service::stop() {
  for (auto& m : models_) m->batcher->stop();
}

Service::Call Service::parse(const std::string& body) const {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw HttpError{400, std::string("malformed JSON: ") + e.what()};
  }
  if (!j.is_object()) throw HttpError{400, "the request must be a JSON object with a \"text\" field"};
  for (const auto& [key, value] : j.items())
    if (key != "text" && key != "model" && key != "beam_size" && key != "n_best" && key != "alignment" &&
        key != "level" && key != "mbr" && key != "mbr_temperature")
      throw HttpError{400, "unknown field '" + key +
                               "' (fields: text, model, beam_size, n_best, mbr, mbr_temperature, alignment, level)"};
  Call call;
  call.model = models_.front().get();
  if (auto name = j.find("model"); name != j.end()) {
    std::string names;
    for (const auto& m : models_) names += (names.empty() ? "" : ", ") + m->name;
    if (!name->is_string()) throw HttpError{400, "'model' must be a string, one of " + names};
    const auto wanted = name->get<std::string>();
    const auto it = std::find_if(models_.begin(), models_.end(), [&](const auto& m) { return m->name == wanted; });
    if (it == models_.end()) throw HttpError{400, "no model named '" + wanted + "' (models: " + names + ")"};
    call.model = it->get();
  }
  auto text = j.find("text");
  if (text == j.end()) throw HttpError{400, "missing field 'text': a string or an array of strings"};
  if (text->is_string()) {
    call.request.lines.push_back(text->get<std::string>());
  } else if (text->is_array()) {
    if (static_cast<int64_t>(text->size()) > opt_.max_sentences)
      throw HttpError{413, std::to_string(text->size()) + " sentences in one request; at most " +
                               std::to_string(opt_.max_sentences) + " (--max-sentences)"};
    for (const auto& s : *text) {
      if (!s.is_string()) throw HttpError{400, "'text' must be a string or an array of strings"};
      call.request.lines.push_back(s.get<std::string>());
    }
  } else {
    throw HttpError{400, "'text' must be a string or an array of strings"};
  }
  if (call.request.lines.empty()) throw HttpError{400, "'text' holds no sentence"};
  for (size_t i = 0; i < call.request.lines.size(); ++i) {
    const auto& line = call.request.lines[i];
    if (line.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
      throw HttpError{400, "sentence " + std::to_string(i) + " holds a line break or NUL: send one sentence per entry"};
    const auto pieces = static_cast<int64_t>(call.model->translator->src_tokenizer().encode(line).size());
    if (pieces > opt_.max_pieces)
      throw HttpError{413, "sentence " + std::to_string(i) + " has " + std::to_string(pieces) +
                               " pieces; at most " + std::to_string(opt_.max_pieces) + " (--max-pieces)"};
  }
  // The server's --n-best when the request gives none, at most its beam.
  int64_t n_best = int_field(j, "n_best", opt_.translate.search.n_best, 1, opt_.max_beam_size);
  // n_best without beam_size: a beam of n_best, as nmt-translate's --n-best.
  const int64_t beam_default = std::max(opt_.translate.search.beam_size, n_best);
  call.request.beam_size = int_field(j, "beam_size", beam_default, 1, opt_.max_beam_size);
  if (!j.contains("n_best")) n_best = std::min(n_best, call.request.beam_size);
  if (n_best > call.request.beam_size)
    throw HttpError{400, "'n_best' " + std::to_string(n_best) + " is above 'beam_size' " +
                             std::to_string(call.request.beam_size)};
  call.request.n_best = n_best;
  call.request.mbr = mbr_fields(j, call.request.beam_size, opt_.mbr);
  call.alignment = choice_field(j, "alignment", {"none", "hard", "soft"});
  call.words = choice_field(j, "level", {"piece", "word"}) == "word";
  call.request.attention = call.alignment != "none";
  call.request.deadline = ServeClock::now() + std::chrono::seconds(opt_.timeout_seconds);
  return call;
}

HttpReply Service::answer(const Call& call, const BatchReply& reply) const {
  Translator& translator = *call.model->translator;  // used by this request's thread only for attention (hypothesis_attention)
  json out = json::array();
  for (size_t i = 0; i < reply.hyps.size(); ++i) {
    const auto& line = call.request.lines[i];
    const auto& list = reply.hyps[i];
    // One hypothesis' JSON: its text and scores, and its expected utility where MBR picked.
    const auto entry = [&](const Hypothesis& h) {
      json e{{"text", translator.detokenize(h, line, false)}, {"score", h.norm_score}, {"log_prob", h.score}};
      if (!std::isnan(h.r2l_logprob)) e["r2l_log_prob"] = h.r2l_logprob;
      if (!std::isnan(h.channel_logprob)) e["channel_log_prob"] = h.channel_logprob;
      if (!std::isnan(h.mbr_utility)) e["mbr"] = h.mbr_utility;
      return e;
    };
    json t = entry(list.front());
    if (call.request.n_best > 1) {
      json nb = json::array();
      for (const auto& h : list) nb.push_back(entry(h));
      t["n_best"] = nb;
    }
    if (call.alignment != "none") {
      AttentionMatrix pieces;
      if (!line.empty()) pieces = hypothesis_attention(translator, line, list.front(), opt_.translate.max_input_length);
      const AttentionMatrix words = merge_to_words(pieces);
      t["alignment"] = to_pharaoh(hard_alignment(words, HardMethod::kArgmax));
      if (call.alignment == "soft") t["attention"] = matrix_json(call.words ? words : pieces);
    }
    out.push_back(std::move(t));
  }
  return HttpReply{200, dump(json{{"model", call.model->name}, {"translations", out}}) + "\n", 0};
}

HttpReply Service::translate(const std::string& body) {
  try {
    const Call call = parse(body);
    Batcher& batcher = *call.model->batcher;
    auto future = batcher.submit(call.request);
    if (!future)
      return error_reply(503, "the server is busy (" + std::to_string(batcher.queued_lines()) +
                                  " sentences waiting): retry later", 1);
    const BatchReply reply = future->get();
    if (reply.expired)
      return error_reply(503, "the request waited more than " + std::to_string(opt_.timeout_seconds) +
                                  " s (--timeout): retry later", 1);
    if (!reply.error.empty()) return error_reply(500, "translation failed: " + reply.error);
    return answer(call, reply);
  } catch (const HttpError& e) {
    return error_reply(e.status, e.message);
  } catch (const std::exception& e) {
    return error_reply(500, std::string("internal error: ") + e.what());
  }
}

HttpReply Service::health() const {
  int64_t queued = 0;
  for (const auto& m : models_) queued += m->batcher->queued_lines();
  return HttpReply{200, dump(json{{"status", "ok"}, {"queued_sentences", queued}}) + "\n", 0};
}

HttpReply Service::models() const { return HttpReply{200, models_json_, 0}; }

}  // namespace nmt
