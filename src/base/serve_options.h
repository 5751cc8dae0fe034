// nmt-serve's options: the model, where it listens, the bounds that keep it
// answering under any load (request size, sentences and pieces per request,
// the queue, a deadline), the dynamic batcher's wait, the translation
// defaults a request may override (beam size, n-best, minimum Bayes risk),
// and what makes one served model a whole system, as nmt-translate reads it
// (ensemble weights, rescoring models).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/fields.h"
#include "base/runtime_options.h"
#include "base/translate_options.h"

namespace nmt {

// One model a server answers for: its name and its checkpoints (several: an
// ensemble, as in nmt-translate).
struct ServedModel {
  std::string name;
  std::vector<std::string> paths;
};

struct ServeOptions {
  std::vector<std::string> model_paths;  // -m as given: PATH, or NAME=PATH (see served_models())
  std::vector<double> ensemble_weights;  // one per -m, in order (one served model only); empty: all equal
  std::string host = "127.0.0.1";        // the address to listen on (a non-local one only when asked)
  int64_t port = 8080;                   // 0: any free port (logged)
  int64_t max_body_bytes = 1 << 20;      // a larger request body: 413
  int64_t max_sentences = 64;            // sentences in one request at most: 413 beyond
  int64_t max_pieces = 256;              // source pieces per sentence at most: 413 beyond
  int64_t max_beam_size = 16;            // largest beam_size (and n_best) a request may ask for: 400 beyond
  int64_t queue_sentences = 2048;        // sentences waiting for the batcher at most: 503 with Retry-After beyond
  int64_t batch_wait_ms = 5;             // how long the batcher waits for more requests to fill a batch
  int64_t timeout_seconds = 30;          // a request still waiting after this long is answered 503
  int64_t http_threads = 64;             // connections served at once (each waits on its translation)
  TranslateOptions translate;            // the defaults of every request; --int8/--bf16 fixed at start
  RescoreOptions rescore;                // rescores every beam (one served model only)
  MbrOptions mbr;                        // the default pick of a request whose beam is 2 or more
  RuntimeOptions runtime;
  GivenOptions given;                    // the options the user set (the app fills it): resolved(), validate() read it

  // These options with the defaults that depend on which were given filled
  // in (SearchOptions::resolve_beam: --n-best N without --beam-size serves a
  // beam of N, as nmt-translate's). Never throws.
  ServeOptions resolved() const;
  // Throws nmt::UsageError naming the first option out of its range, in
  // conflict with another, or required and missing (-m); ensemble weights
  // and rescoring models with several served models (NAME=PATH) are refused:
  // they belong to one system.
  void validate() const;
  // -m's values grouped into models, in the order each name first appears:
  // "NAME=PATH" adds PATH to the model NAME (NAME: letters, digits, '-', '_'
  // and '.'; a path whose text before its first '=' is no such name is a
  // plain path: ./a=b.ckpt), a plain PATH to the model "default". A model of
  // several paths is an ensemble; the first model answers requests that name
  // none. Throws nmt::UsageError for an empty path or no -m at all.
  std::vector<ServedModel> served_models() const;
  template <class S, class V>
  static void fields(S& s, V&& v);
};

// ServeOptions' fields, in the order --help lists them.
template <class S, class V>
void ServeOptions::fields(S& s, V&& v) {
  const char* io = "Server";
  v(Field{"model",
          "Checkpoint (.ckpt) written by nmt-train; repeat for an ensemble; NAME=PATH serves several models, "
          "a request picks one by its \"model\" (the first when it names none), and a NAME repeated makes an ensemble",
          io, "-m", kMultiple},
    s.model_paths);
  v(Field{"ensemble-weights", "With several -m of one model: each checkpoint's weight, in -m's order, in the "
                              "ensemble's mean of log-probabilities (as nmt-translate's); default all equal",
          io, nullptr, kMultiple},
    s.ensemble_weights);
  v(Field{"host", "Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)", io}, s.host);
  v(Field{"port", "TCP port (0: any free one, logged)", io}.within(0, 65535), s.port);
  v(Field{"http-threads", "Connections served at once", io}.within(1, 4096), s.http_threads);
  const char* lim = "Limits";
  v(Field{"max-body-bytes", "Largest request body (larger: 413)", lim}.within(64, int64_t{1} << 30), s.max_body_bytes);
  v(Field{"max-sentences", "Most sentences in one request (more: 413)", lim}.within(1, 1 << 20), s.max_sentences);
  v(Field{"max-pieces", "Most source pieces in one sentence (more: 413)", lim}.within(1, 1 << 20), s.max_pieces);
  v(Field{"max-beam-size", "Largest beam_size or n_best a request may ask for (larger: 400)", lim}
        .within(1, kMaxBeamSize),
    s.max_beam_size);
  v(Field{"queue-sentences", "Most sentences waiting to be translated (more: 503 with Retry-After)", lim}
        .within(1, 1 << 24),
    s.queue_sentences);
  v(Field{"timeout", "Seconds a request may wait for its turn (then: 503)", lim}.within(1, 86400), s.timeout_seconds);
  v(Field{"batch-wait-ms", "Milliseconds the batcher waits for more requests to fill a batch", lim}.within(0, 10000),
    s.batch_wait_ms);
  TranslateOptions::fields(s.translate, v);
  RescoreOptions::fields(s.rescore, v);
  MbrOptions::fields(s.mbr, v);
  RuntimeOptions::fields(s.runtime, v);
}

}  // namespace nmt
