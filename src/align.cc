// Forced and free attention matrices, CSV output.
#include "align.h"

#include <c10/core/InferenceMode.h>

#include <fstream>
#include <iomanip>
#include <iostream>

#include "corpus.h"
#include "device.h"

#include "error.h"

namespace nmt {
namespace {

std::vector<std::string> with_eos(std::vector<std::string> pieces) {
  pieces.push_back("</s>");
  return pieces;
}

AttentionMatrix to_matrix(const torch::Tensor& alpha, std::vector<std::string> src, std::vector<std::string> tgt) {
  AttentionMatrix m;
  m.src_tokens = std::move(src);
  m.tgt_tokens = std::move(tgt);
  auto a = alpha.to(torch::kFloat).cpu().contiguous();  // [T, S]
  auto acc = a.accessor<float, 2>();
  for (int64_t t = 0; t < a.size(0); ++t) {
    m.weights.emplace_back(a.size(1));
    for (int64_t j = 0; j < a.size(1); ++j) m.weights.back()[j] = acc[t][j];
  }
  return m;
}

}  // namespace

AttentionMatrix forced_attention(Translator& tr, const std::string& src, const std::string& tgt) {
  if (src.empty() || tgt.empty()) throw Error("forced alignment needs a non-empty source and target");
  auto& model = tr.model();
  const bool was_training = model->is_training();
  model->eval();
  c10::InferenceMode guard;
  const auto device = model->parameters().front().device();
  std::vector<Example> ex(1);
  ex[0].src = tr.encode_source(src);
  ex[0].tgt = tr.tgt_tokenizer().encode(tgt);
  auto batch = make_batch(ex, {0}).to(device);
  torch::Tensor alpha;
  model->forward(batch.src, batch.src_len, batch.tgt_in, &alpha);  // alpha [1, T, S]
  if (was_training) model->train();
  return to_matrix(alpha[0], with_eos(tr.src_tokenizer().pieces(src)), with_eos(tr.tgt_tokenizer().pieces(tgt)));
}

AttentionMatrix free_attention(Translator& tr, const std::string& src) {
  if (src.empty()) throw Error("alignment needs a non-empty source");
  TranslateOptions opt;
  auto hyp = tr.translate({src}, opt, /*with_attention=*/true)[0][0];
  std::vector<std::string> tgt;
  for (int64_t id : hyp.ids) tgt.push_back(tr.tgt_tokenizer().piece(id));
  tgt.push_back("</s>");
  auto alpha = hyp.attention.narrow(0, 0, std::min<int64_t>(hyp.attention.size(0), tgt.size()));
  tgt.resize(alpha.size(0));
  return to_matrix(alpha, with_eos(tr.src_tokenizer().pieces(src)), tgt);
}

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void write_csv(std::ostream& out, const AttentionMatrix& m) {
  out << "\"\"";
  for (const auto& s : m.src_tokens) out << ',' << csv_quote(s);
  out << '\n';
  out << std::fixed << std::setprecision(6);
  for (size_t t = 0; t < m.weights.size(); ++t) {
    out << csv_quote(m.tgt_tokens[t]);
    for (float w : m.weights[t]) out << ',' << w;
    out << '\n';
  }
  out.unsetf(std::ios::floatfield);
}

void run_alignment(const AlignRunOptions& opt) {
  set_threads(opt.threads);
  auto loaded = load_checkpoint(opt.model_path, resolve_device(opt.device));
  Translator tr(loaded);
  std::vector<std::string> src, tgt;
  if (!opt.tsv.empty()) {
    if (!opt.src.empty() || !opt.tgt.empty()) throw Error("give --tsv or --src/--tgt, not both");
    auto c = read_tsv(opt.tsv == "-" ? "/dev/stdin" : opt.tsv);
    src = std::move(c.src);
    tgt = std::move(c.tgt);
  } else if (!opt.src.empty()) {
    if (opt.tgt.empty()) {
      src = read_lines(opt.src);
    } else {
      auto c = read_parallel(opt.src, opt.tgt);
      src = std::move(c.src);
      tgt = std::move(c.tgt);
    }
  } else {
    throw Error("nothing to align: give --src (and --tgt for forced mode) or --tsv");
  }
  if (opt.max_pairs > 0 && static_cast<int64_t>(src.size()) > opt.max_pairs) src.resize(opt.max_pairs);
  std::ofstream fout;
  const bool to_stdout = opt.output.empty() || opt.output == "-";
  if (!to_stdout) {
    fout.open(opt.output, std::ios::binary | std::ios::trunc);
    if (!fout) throw Error(located(opt.output, 0, "cannot open output for writing"));
  }
  std::ostream& out = to_stdout ? std::cout : fout;
  for (size_t i = 0; i < src.size(); ++i) {
    if (i > 0) out << '\n';
    if (src[i].empty()) continue;
    write_csv(out, tgt.empty() ? free_attention(tr, src[i]) : forced_attention(tr, src[i], tgt[i]));
  }
  out.flush();
  if (!out) throw Error("write failed (disk full?)");
}

}  // namespace nmt
