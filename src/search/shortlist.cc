// Lexical shortlists (see shortlist.h).
#include "search/shortlist.h"

#include <algorithm>
#include <unordered_map>

#include "base/error.h"
#include "io/io.h"

namespace nmt {

Shortlist Shortlist::load(const ShortlistOptions& opt, const Tokenizer& src, const Tokenizer& tgt) {
  opt.validate();
  if (opt.path.empty()) throw UsageError("--shortlist: give the lexical table's path");
  auto ids_of = [](const Tokenizer& tok) {
    std::unordered_map<std::string, int32_t> ids;
    for (int64_t i = kEosId + 1; i < tok.vocab_size(); ++i) ids.emplace(tok.piece(i), static_cast<int32_t>(i));
    return ids;
  };
  const auto src_ids = ids_of(src), tgt_ids = ids_of(tgt);
  Shortlist s;
  s.opt_ = opt;
  s.tgt_vocab_ = tgt.vocab_size();
  s.translations_.resize(static_cast<size_t>(src.vocab_size()));
  LineReader in(opt.path, 1 << 12);
  std::string line;
  bool cropped = false;
  while (in.next(&line, &cropped)) {
    const auto where = [&](const std::string& what) { return Error(located(in.name(), in.line(), what)); };
    if (cropped) throw where("line longer than 4096 bytes: not a lexical table");
    if (line.empty()) continue;
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos || line.find('\t', b + 1) != std::string::npos)
      throw where("expected source_piece<TAB>target_piece<TAB>probability");
    const std::string prob = line.substr(b + 1);
    char* end = nullptr;
    const double p = std::strtod(prob.c_str(), &end);
    if (prob.empty() || *end != '\0' || !(p >= 0 && p <= 1)) throw where("probability '" + prob + "' is not in [0, 1]");
    const auto e = src_ids.find(line.substr(0, a)), f = tgt_ids.find(line.substr(a + 1, b - a - 1));
    if (e == src_ids.end() || f == tgt_ids.end()) continue;
    auto& list = s.translations_[static_cast<size_t>(e->second)];
    if (static_cast<int64_t>(list.size()) < opt.best) list.push_back(f->second);
  }
  return s;
}

torch::Tensor Shortlist::for_batch(const torch::Tensor& src) const {
  std::vector<char> keep(static_cast<size_t>(tgt_vocab_), 0);
  const int64_t first = std::min(tgt_vocab_, std::max<int64_t>(opt_.frequent, kEosId + 1));
  std::fill(keep.begin(), keep.begin() + first, 1);
  const auto ids = src.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* p = ids.data_ptr<int64_t>();
  std::vector<char> seen(translations_.size(), 0);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t e = p[i];
    if (e <= kEosId || e >= static_cast<int64_t>(translations_.size()) || seen[e]) continue;
    seen[e] = 1;
    for (int32_t f : translations_[e]) keep[f] = 1;
  }
  std::vector<int64_t> out;
  for (int64_t f = 0; f < tgt_vocab_; ++f)
    if (keep[f]) out.push_back(f);
  return torch::tensor(out, torch::kInt64);
}

}  // namespace nmt
