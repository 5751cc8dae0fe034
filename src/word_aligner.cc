// fast_align-style IBM Model 2 (see word_aligner.h).
#include "word_aligner.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "error.h"
#include "utf8.h"

namespace nmt {
namespace {

// Digamma for x > 0 (asymptotic series after shifting x above 6).
double digamma(double x) {
  double r = 0;
  while (x < 6) {
    r -= 1 / x;
    x += 1;
  }
  const double f = 1 / (x * x);
  return r + std::log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

// Unnormalized diagonal prior of source position i (1-based) for target
// position j (1-based) in an n-word source and m-word target.
double diagonal(int i, int j, int n, int m, double tension) {
  return std::exp(-tension * std::fabs(static_cast<double>(i) / n - static_cast<double>(j) / m));
}

}  // namespace

struct WordAligner::Impl {
  WordAlignerOptions opt;
  std::unordered_map<std::string, int32_t> src_vocab{{"", 0}};  // 0: NULL
  std::unordered_map<std::string, int32_t> tgt_vocab;
  struct Entry {
    float t = 0;      // t(f | e)
    float count = 0;  // expected count in the current iteration
  };
  std::unordered_map<uint64_t, Entry> table;  // key: e << 32 | f

  static uint64_t key(int32_t e, int32_t f) { return static_cast<uint64_t>(e) << 32 | static_cast<uint32_t>(f); }

  std::vector<int32_t> ids(const std::string& s, std::unordered_map<std::string, int32_t>& vocab, bool grow) {
    std::vector<int32_t> out;
    for (auto& w : split_ws(s)) {
      auto it = vocab.find(w);
      if (it == vocab.end()) {
        if (!grow) {
          out.push_back(-1);
          continue;
        }
        it = vocab.emplace(std::move(w), static_cast<int32_t>(vocab.size())).first;
      }
      out.push_back(it->second);
    }
    return out;
  }

  // Link probabilities of target word j (0-based) over NULL and the source
  // words, unnormalized, into `p` (p[0] NULL, p[i+1] source word i).
  void posteriors(const std::vector<int32_t>& e, const std::vector<int32_t>& f, size_t j, std::vector<double>* p,
                  std::vector<Entry*>* entries) {
    const int n = static_cast<int>(e.size()), m = static_cast<int>(f.size());
    p->assign(n + 1, 0.0);
    if (entries) entries->assign(n + 1, nullptr);
    double z = 0;
    for (int i = 0; i < n; ++i) z += diagonal(i + 1, static_cast<int>(j) + 1, n, m, opt.diagonal_tension);
    for (int i = 0; i <= n; ++i) {
      const int32_t word = i == 0 ? 0 : e[i - 1];
      if (word < 0 || f[j] < 0) continue;
      auto it = table.find(key(word, f[j]));
      if (it == table.end()) continue;
      const double prior = i == 0 ? opt.null_prob
                                  : (1 - opt.null_prob) * diagonal(i, static_cast<int>(j) + 1, n, m, opt.diagonal_tension) / z;
      (*p)[i] = prior * it->second.t;
      if (entries) (*entries)[i] = &it->second;
    }
  }
};

WordAligner::WordAligner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WordAligner::WordAligner(WordAligner&&) noexcept = default;
WordAligner& WordAligner::operator=(WordAligner&&) noexcept = default;
WordAligner::~WordAligner() = default;

WordAligner WordAligner::train(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                               const WordAlignerOptions& opt) {
  if (src.size() != tgt.size())
    throw Error("word aligner: " + std::to_string(src.size()) + " source and " + std::to_string(tgt.size()) +
                " target sentences");
  if (opt.iterations < 1 || opt.null_prob <= 0 || opt.null_prob >= 1 || opt.diagonal_tension < 0 || opt.alpha < 0)
    throw Error("word aligner: iterations >= 1, 0 < null_prob < 1, diagonal_tension >= 0 and alpha >= 0 are required");
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  std::vector<std::vector<int32_t>> e(src.size()), f(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    e[k] = impl->ids(src[k], impl->src_vocab, true);
    f[k] = impl->ids(tgt[k], impl->tgt_vocab, true);
  }
  // t starts uniform over the target words each source word (and NULL) co-occurs with.
  for (size_t k = 0; k < e.size(); ++k)
    for (int32_t fw : f[k]) {
      impl->table[Impl::key(0, fw)];
      for (int32_t ew : e[k]) impl->table[Impl::key(ew, fw)];
    }
  for (auto& [k, entry] : impl->table) entry.t = 1.0f;
  std::vector<double> p;
  std::vector<Impl::Entry*> entries;
  const double vocab = static_cast<double>(impl->tgt_vocab.size());
  for (int it = 0; it < opt.iterations; ++it) {
    for (auto& [k, entry] : impl->table) entry.count = 0;
    for (size_t k = 0; k < e.size(); ++k) {  // E-step: expected link counts
      for (size_t j = 0; j < f[k].size(); ++j) {
        impl->posteriors(e[k], f[k], j, &p, &entries);
        double z = 0;
        for (double v : p) z += v;
        if (z <= 0) continue;
        for (size_t i = 0; i < p.size(); ++i)
          if (entries[i]) entries[i]->count += static_cast<float>(p[i] / z);
      }
    }
    // M-step: t(f|e) = count(e,f) / count(e), or its variational-Bayes form.
    std::vector<double> total(impl->src_vocab.size(), 0.0);
    for (const auto& [k, entry] : impl->table) total[k >> 32] += entry.count;
    for (auto& [k, entry] : impl->table) {
      const double c = entry.count, tot = total[k >> 32];
      if (opt.alpha > 0)
        entry.t = static_cast<float>(std::exp(digamma(c + opt.alpha) - digamma(tot + vocab * opt.alpha)));
      else
        entry.t = tot > 0 ? static_cast<float>(c / tot) : 0.0f;
    }
  }
  return WordAligner(std::move(impl));
}

std::set<Link> WordAligner::align(const std::string& src, const std::string& tgt) const {
  auto& impl = *impl_;
  std::vector<int32_t> e = impl.ids(src, impl.src_vocab, false), f = impl.ids(tgt, impl.tgt_vocab, false);
  std::set<Link> links;
  std::vector<double> p;
  for (size_t j = 0; j < f.size(); ++j) {
    impl.posteriors(e, f, j, &p, nullptr);
    size_t best = 0;
    for (size_t i = 1; i < p.size(); ++i)
      if (p[i] > p[best]) best = i;
    if (best > 0 && p[best] > 0) links.insert({static_cast<int>(best) - 1, static_cast<int>(j)});
  }
  return links;
}

double WordAligner::log_translation(const std::string& e, const std::string& f) const {
  const auto ei = impl_->src_vocab.find(e), fi = impl_->tgt_vocab.find(f);
  if (ei == impl_->src_vocab.end() || fi == impl_->tgt_vocab.end()) return -std::numeric_limits<double>::infinity();
  const auto it = impl_->table.find(Impl::key(ei->second, fi->second));
  return it == impl_->table.end() ? -std::numeric_limits<double>::infinity() : std::log(it->second.t);
}

}  // namespace nmt
