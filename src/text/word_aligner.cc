// fast_align-style IBM Model 2 and the training of both models (see
// word_aligner.h); the HMM's forward-backward is in word_aligner_hmm.cc.
#include "text/word_aligner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "base/error.h"
#include "base/utf8.h"
#include "base/validate.h"
#include "text/word_aligner_impl.h"

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

std::vector<int32_t> WordAligner::Impl::ids(const std::string& s, std::unordered_map<std::string, int32_t>& vocab,
                                            bool grow) {
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

void WordAligner::Impl::slots(const std::vector<int32_t>& e, const std::vector<int32_t>& f, size_t j,
                              int32_t* out) const {
  for (size_t i = 0; i <= e.size(); ++i) {
    const int32_t word = i == 0 ? 0 : e[i - 1];
    const auto it = word < 0 || f[j] < 0 ? table.end() : table.find(key(word, f[j]));
    out[i] = it == table.end() ? -1 : it->second;
  }
}

void WordAligner::Impl::ibm2_posteriors(int n, int m, size_t j, const int32_t* slot, std::vector<double>* p) const {
  p->assign(n + 1, 0.0);
  double z = 0;
  for (int i = 1; i <= n; ++i) z += (*p)[i] = diagonal(i, static_cast<int>(j) + 1, n, m, opt.diagonal_tension);
  for (int i = 0; i <= n; ++i) {
    const double prior = i == 0 ? opt.null_prob : (1 - opt.null_prob) * (*p)[i] / z;
    (*p)[i] = slot[i] < 0 ? 0.0 : prior * entries[slot[i]].t;
  }
}

void WordAligner::Impl::maximize(const std::vector<int32_t>& owner) {
  // t(f|e) = count(e,f) / count(e), or its variational-Bayes form.
  const double vocab = static_cast<double>(tgt_vocab.size());
  std::vector<double> total(src_vocab.size(), 0.0);
  for (size_t x = 0; x < entries.size(); ++x) total[owner[x]] += entries[x].count;
  for (size_t x = 0; x < entries.size(); ++x) {
    auto& entry = entries[x];
    const double c = entry.count, tot = total[owner[x]];
    if (opt.alpha > 0)
      entry.t = static_cast<float>(std::exp(digamma(c + opt.alpha) - digamma(tot + vocab * opt.alpha)));
    else
      entry.t = tot > 0 ? static_cast<float>(c / tot) : 0.0f;
  }
}

std::vector<std::vector<double>> WordAligner::Impl::pair_posteriors(const std::vector<int32_t>& e,
                                                                    const std::vector<int32_t>& f) const {
  const int n = static_cast<int>(e.size()), m = static_cast<int>(f.size());
  std::vector<int32_t> slot(static_cast<size_t>(m) * (n + 1));
  for (int j = 0; j < m; ++j) slots(e, f, j, &slot[static_cast<size_t>(j) * (n + 1)]);
  std::vector<std::vector<double>> rows(m);
  std::vector<double> p;
  if (!jump.empty()) {
    hmm_posteriors(slot.data(), n, m, &p, nullptr);
    for (int j = 0; j < m; ++j) rows[j].assign(p.begin() + j * (n + 1), p.begin() + (j + 1) * (n + 1));
    return rows;
  }
  for (int j = 0; j < m; ++j) {
    ibm2_posteriors(n, m, j, &slot[static_cast<size_t>(j) * (n + 1)], &p);
    double z = 0;
    for (double v : p) z += v;
    for (double& v : p) v = z > 0 ? v / z : 0.0;
    rows[j] = p;
  }
  return rows;
}

WordAligner::WordAligner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WordAligner::WordAligner(WordAligner&&) noexcept = default;
WordAligner& WordAligner::operator=(WordAligner&&) noexcept = default;
WordAligner::~WordAligner() = default;

WordAligner::Impl::Corpus WordAligner::Impl::prepare(const std::vector<std::string>& src,
                                                     const std::vector<std::string>& tgt) {
  Corpus c;
  c.e.resize(src.size());
  c.f.resize(src.size());
  c.start.resize(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    c.e[k] = ids(src[k], src_vocab, true);
    c.f[k] = ids(tgt[k], tgt_vocab, true);
    c.start[k] = c.slot.size();
    for (int32_t fw : c.f[k])
      for (size_t i = 0; i <= c.e[k].size(); ++i) {
        const int32_t ew = i == 0 ? 0 : c.e[k][i - 1];
        auto [it, added] = table.emplace(key(ew, fw), static_cast<int32_t>(entries.size()));
        if (added) {
          entries.push_back({1.0f, 0.0f});
          c.owner.push_back(ew);
        }
        c.slot.push_back(it->second);
      }
  }
  return c;
}

void WordAligner::Impl::expected_links(const Corpus& c, size_t k, std::vector<double>* gamma,
                                       std::vector<double>* jump_counts) const {
  const int n = static_cast<int>(c.e[k].size()), m = static_cast<int>(c.f[k].size());
  const int32_t* s = &c.slot[c.start[k]];
  if (!jump.empty()) return hmm_posteriors(s, n, m, gamma, jump_counts);
  gamma->assign(static_cast<size_t>(m) * (n + 1), 0.0);
  std::vector<double> p;
  for (int j = 0; j < m; ++j) {
    ibm2_posteriors(n, m, j, s + static_cast<size_t>(j) * (n + 1), &p);
    double z = 0;
    for (double v : p) z += v;
    if (z > 0)
      for (int i = 0; i <= n; ++i) (*gamma)[static_cast<size_t>(j) * (n + 1) + i] = p[i] / z;
  }
}

void WordAligner::Impl::add_counts(const Corpus& c, size_t k, const std::vector<double>& gamma) {
  const int32_t* s = &c.slot[c.start[k]];
  for (size_t x = 0; x < gamma.size(); ++x) entries[s[x]].count += static_cast<float>(gamma[x]);
}

void WordAligner::Impl::maximize_all(const Corpus& c, const std::vector<double>& jump_counts) {
  maximize(c.owner);
  for (auto& entry : entries) entry.count = 0;
  if (jump.empty()) return;
  double total = 0;
  for (double x : jump_counts) total += x + 1;  // add-one: every jump stays possible
  for (size_t d = 0; d < jump.size(); ++d) jump[d] = (jump_counts[d] + 1) / total;
}

namespace {

void check_pairs(const std::vector<std::string>& src, const std::vector<std::string>& tgt) {
  if (src.size() != tgt.size())
    throw Error("word aligner: " + std::to_string(src.size()) + " source and " + std::to_string(tgt.size()) +
                " target sentences");
}

// The sum of the words' columns (all but column 0, NULL) of row r of g
// ([rows][cols]).
double link_mass(const std::vector<double>& g, int cols, int r) {
  double sum = 0;
  for (int c = 1; c < cols; ++c) sum += g[static_cast<size_t>(r) * cols + c];
  return sum;
}

// Scales the words' columns of each row of g so that they sum to was[r]
// again: NULL keeps its share.
void keep_link_mass(int rows, int cols, const std::vector<double>& was, std::vector<double>* g) {
  for (int r = 0; r < rows; ++r) {
    const double now = link_mass(*g, cols, r);
    if (now > 0)
      for (int c = 1; c < cols; ++c) (*g)[static_cast<size_t>(r) * cols + c] *= was[r] / now;
  }
}

// The two directions' posteriors of one pair agree: fwd is [m][n + 1] (the
// source->target model, column 0 NULL), rev [n][m + 1]; each link (i, j)
// gets weight fwd(j, i) * rev(i, j) on both sides, and each row's links are
// then scaled back to the mass they had, so that NULL keeps its share.
void agree(int n, int m, std::vector<double>* fwd, std::vector<double>* rev) {
  std::vector<double> fwd_mass(m), rev_mass(n);
  for (int j = 0; j < m; ++j) fwd_mass[j] = link_mass(*fwd, n + 1, j);
  for (int i = 0; i < n; ++i) rev_mass[i] = link_mass(*rev, m + 1, i);
  for (int j = 0; j < m; ++j)
    for (int i = 0; i < n; ++i) {
      double& a = (*fwd)[static_cast<size_t>(j) * (n + 1) + i + 1];
      double& b = (*rev)[static_cast<size_t>(i) * (m + 1) + j + 1];
      a = b = a * b;
    }
  keep_link_mass(m, n + 1, fwd_mass, fwd);
  keep_link_mass(n, m + 1, rev_mass, rev);
}

}  // namespace

void WordAligner::Impl::run_em(Impl& a, const Corpus& ca, Impl* b, const Corpus* cb) {
  std::vector<double> ga, gb, ja, jb;
  const auto iterate = [&](int iterations) {
    for (int it = 0; it < iterations; ++it) {
      ja.assign(a.jump.size(), 0.0);
      jb.assign(b ? b->jump.size() : 0, 0.0);
      for (size_t k = 0; k < ca.e.size(); ++k) {
        a.expected_links(ca, k, &ga, &ja);
        if (b) {
          b->expected_links(*cb, k, &gb, &jb);
          agree(static_cast<int>(ca.e[k].size()), static_cast<int>(ca.f[k].size()), &ga, &gb);
          b->add_counts(*cb, k, gb);
        }
        a.add_counts(ca, k, ga);
      }
      a.maximize_all(ca, ja);
      if (b) b->maximize_all(*cb, jb);
    }
  };
  iterate(a.opt.iterations);  // IBM Model 2
  if (!a.opt.hmm) return;
  a.init_jumps();  // the HMM, from IBM Model 2's t(f|e)
  if (b) b->init_jumps();
  iterate(a.opt.hmm_iterations);
}

WordAligner WordAligner::train(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                               const WordAlignerOptions& opt) {
  check_pairs(src, tgt);
  opt.validate();
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  const auto corpus = impl->prepare(src, tgt);
  Impl::run_em(*impl, corpus, nullptr, nullptr);
  return WordAligner(std::move(impl));
}

std::pair<WordAligner, WordAligner> WordAligner::train_in_agreement(const std::vector<std::string>& src,
                                                                    const std::vector<std::string>& tgt,
                                                                    const WordAlignerOptions& opt) {
  check_pairs(src, tgt);
  opt.validate();
  auto fwd = std::make_unique<Impl>(), rev = std::make_unique<Impl>();
  fwd->opt = rev->opt = opt;
  const auto cf = fwd->prepare(src, tgt), cr = rev->prepare(tgt, src);
  Impl::run_em(*fwd, cf, rev.get(), &cr);
  return {WordAligner(std::move(fwd)), WordAligner(std::move(rev))};
}

std::vector<std::vector<double>> WordAligner::link_posteriors(const std::string& src, const std::string& tgt) const {
  auto& impl = *impl_;
  auto rows = impl.pair_posteriors(impl.ids(src, impl.src_vocab, false), impl.ids(tgt, impl.tgt_vocab, false));
  for (auto& row : rows) row.erase(row.begin());  // NULL
  return rows;
}

std::set<Link> WordAligner::align(const std::string& src, const std::string& tgt) const {
  auto& impl = *impl_;
  std::set<Link> links;
  const auto rows = impl.pair_posteriors(impl.ids(src, impl.src_vocab, false), impl.ids(tgt, impl.tgt_vocab, false));
  for (size_t j = 0; j < rows.size(); ++j) {
    // The most probable source word, unless NULL is at least as probable.
    size_t best = 0;
    for (size_t i = 1; i < rows[j].size(); ++i)
      if (rows[j][i] > rows[j][best]) best = i;
    if (best > 0) links.insert({static_cast<int>(best) - 1, static_cast<int>(j)});
  }
  return links;
}

double WordAligner::log_translation(const std::string& e, const std::string& f) const {
  const auto ei = impl_->src_vocab.find(e), fi = impl_->tgt_vocab.find(f);
  if (ei == impl_->src_vocab.end() || fi == impl_->tgt_vocab.end()) return -std::numeric_limits<double>::infinity();
  const auto it = impl_->table.find(Impl::key(ei->second, fi->second));
  return it == impl_->table.end() ? -std::numeric_limits<double>::infinity() : std::log(impl_->entries[it->second].t);
}

std::vector<WordAligner::Translation> WordAligner::lexical_table(size_t per_source, double min_prob) const {
  const auto& impl = *impl_;
  std::vector<const std::string*> src_word(impl.src_vocab.size()), tgt_word(impl.tgt_vocab.size());
  for (const auto& [w, id] : impl.src_vocab) src_word[id] = &w;
  for (const auto& [w, id] : impl.tgt_vocab) tgt_word[id] = &w;
  std::vector<std::vector<std::pair<float, int32_t>>> by_source(impl.src_vocab.size());  // (t, f) per e
  for (const auto& [k, x] : impl.table) {
    const auto e = static_cast<int32_t>(k >> 32), f = static_cast<int32_t>(k & 0xffffffffu);
    if (e != 0 && impl.entries[x].t > 0 && impl.entries[x].t >= min_prob) by_source[e].push_back({impl.entries[x].t, f});
  }
  std::vector<int32_t> order;
  for (size_t e = 1; e < by_source.size(); ++e) order.push_back(static_cast<int32_t>(e));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return *src_word[a] < *src_word[b]; });
  std::vector<Translation> out;
  for (int32_t e : order) {
    auto& list = by_source[e];
    // Most probable first; ties in target byte order, so the table does not depend on hashing.
    std::sort(list.begin(), list.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : *tgt_word[a.second] < *tgt_word[b.second];
    });
    if (list.size() > per_source) list.resize(per_source);
    for (const auto& [t, f] : list) out.push_back({*src_word[e], *tgt_word[f], t});
  }
  return out;
}

}  // namespace nmt
