// nmt-align's output: the alignments in the chosen format on one stream or
// as per-pair files (with heatmaps), and the statistical aligners' lexical table (--format lex).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "base/format.h"
#include "model/checkpoint.h"
#include "tools/align_pipeline.h"

namespace nmt::align_detail {

AlignmentSink::AlignmentSink(const AlignRunOptions& opt) : opt_(opt) {
  for (const auto& dir : {opt.output_dir, opt.heatmap_dir}) {
    if (dir.empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error(located(dir, 0, "cannot create folder: " + ec.message()));
    remove_stale_temporaries(dir);
  }
  if (opt.output_dir.empty() || opt.format == AlignFormat::kPharaoh) out_ = std::make_unique<OutputFile>(opt.output);
  // A tidy table has its header even when there are no pairs.
  if (out_ && opt.format == AlignFormat::kTidy) write_tidy_csv(out_->stream(), AttentionMatrix{}, 0, true);
}

void AlignmentSink::write(size_t k, const PairAlignment& a) {
  if (!opt_.heatmap_dir.empty() && a.has_matrix)
    write_file(numbered(opt_.heatmap_dir, k, ".svg"), [&](std::ostream& o) { write_svg(o, a.shown, heatmap_title(k, a)); });
  switch (opt_.format) {
    case AlignFormat::kPharaoh:  // free mode: "translation ||| links", as marian-decoder --alignment
      if (a.free) out_->stream() << a.translation << " ||| ";
      out_->stream() << to_pharaoh(a.links) << '\n';
      break;
    case AlignFormat::kTidy:
      if (!opt_.output_dir.empty()) {
        write_file(numbered(opt_.output_dir, k, ".csv"),
                   [&](std::ostream& o) { write_tidy_csv(o, a.shown, k, /*header=*/true); });
      } else {
        write_tidy_csv(out_->stream(), a.shown, k, /*header=*/false);
      }
      break;
    case AlignFormat::kSvg:
      if (!opt_.output_dir.empty())
        write_file(numbered(opt_.output_dir, k, ".svg"), [&](std::ostream& o) { write_svg(o, a.shown, heatmap_title(k, a)); });
      break;
    case AlignFormat::kLex:  // one table for the whole corpus (write_lexical_table), nothing per pair
      break;
    case AlignFormat::kCsv:
      if (!opt_.output_dir.empty()) {
        write_file(numbered(opt_.output_dir, k, ".csv"), [&](std::ostream& o) { write_csv(o, a.shown); });
      } else {
        if (k > 0) out_->stream() << '\n';  // blocks are separated by one empty line
        write_csv(out_->stream(), a.shown);
      }
      break;
  }
}

void AlignmentSink::commit(size_t pairs) {
  if (out_) out_->commit();
  const bool per_pair = !opt_.output_dir.empty() && (opt_.format == AlignFormat::kCsv ||
                                                     opt_.format == AlignFormat::kTidy || opt_.format == AlignFormat::kSvg);
  if (per_pair) remove_stale(opt_.output_dir, opt_.format == AlignFormat::kSvg ? ".svg" : ".csv", pairs);
  if (!opt_.heatmap_dir.empty()) remove_stale(opt_.heatmap_dir, ".svg", pairs);
}

// The path of pair k's file in `dir`: its 1-based number, four digits at
// least, and `ext` ("dir/0012.csv"). Never throws (beyond std::bad_alloc).
std::string AlignmentSink::numbered(const std::string& dir, size_t k, const char* ext) {
  std::ostringstream name;
  name << dir << '/' << std::setw(4) << std::setfill('0') << k + 1 << ext;
  return name.str();
}

// The pair number of a file name numbered() writes with `ext` ("0012.csv":
// 12), or 0 for any other name ("12.csv", "0012 (copy).csv", "notes.csv").
uint64_t AlignmentSink::pair_number(const std::string& name, const std::string& ext) {
  if (name.size() <= ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return 0;
  const std::string stem = name.substr(0, name.size() - ext.size());
  uint64_t k = 0;
  const auto [end, ec] = std::from_chars(stem.data(), stem.data() + stem.size(), k);
  if (ec != std::errc() || end != stem.data() + stem.size() || k == 0) return 0;
  std::ostringstream again;
  again << std::setw(4) << std::setfill('0') << k;
  return again.str() == stem ? k : 0;
}

// Removes the regular files of `dir` named as pairs after the first `pairs`
// (never links, folders or other names), and says so. Never throws.
void AlignmentSink::remove_stale(const std::string& dir, const std::string& ext, size_t pairs) {
  std::vector<std::pair<uint64_t, std::string>> stale;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const uint64_t k = pair_number(name, ext);
    std::error_code type_ec;
    if (k > pairs && it->symlink_status(type_ec).type() == std::filesystem::file_type::regular)
      stale.emplace_back(k, name);
  }
  if (stale.empty()) return;
  std::sort(stale.begin(), stale.end());
  int64_t removed = 0;
  for (const auto& [k, name] : stale) removed += std::filesystem::remove(dir + "/" + name, ec) ? 1 : 0;
  spdlog::info("{}: removed {} of an earlier, longer run ({} .. {}); the folder holds the {} of this run", dir,
               counted(removed, "per-pair file"), stale.front().second, stale.back().second,
               counted(static_cast<int64_t>(pairs), "pair"));
}

// The title of pair k's heatmap: its number (as in its file name), forced
// or free, word or piece level, and the model's file name, e.g.
// "pair 3 · forced · word level · best.ckpt".
std::string AlignmentSink::heatmap_title(size_t k, const PairAlignment& a) const {
  const char* dot = " \u00b7 ";
  const bool average = opt_.symmetrize == Symmetrization::kAverage;  // a word-level matrix of both models
  std::string t = "pair " + std::to_string(k + 1) + dot + (a.free ? "free (the model's translation)" : "forced") +
                  dot + (opt_.level == AlignLevel::kWord || average ? "word" : "piece") + " level" + dot +
                  std::filesystem::path(opt_.model_path).filename().string();
  if (average) t += " averaged with " + std::filesystem::path(opt_.reverse_model).filename().string();
  return t;
}

// Writes one per-pair file through `write`, straight into the file.
void AlignmentSink::write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  OutputFile f(path, /*sweep_stale=*/false);  // the folder was swept when the sink opened
  write(f.stream());
  f.commit();
}

void write_lexical_table(const AlignRunOptions& opt, const Pairs& pairs) {
  const LoadedModel m = load_checkpoint(opt.model_path, torch::kCPU);
  const Pairs all = ibm_training_pairs(opt, pairs);
  auto joined = [](const std::vector<std::string>& pieces) {
    std::string out;
    for (const auto& p : pieces) out += (out.empty() ? "" : " ") + p;
    return out;
  };
  std::vector<std::string> src, tgt;
  for (size_t k = 0; k < all.src.size(); ++k) {
    src.push_back(joined(m.src_tok.pieces(all.src[k])));
    tgt.push_back(joined(m.tgt_tok.pieces(all.tgt[k])));
  }
  spdlog::info("{}: learning a lexical table from {} of pieces, {}", enum_name(opt.aligner),
               counted(static_cast<int64_t>(src.size()), "pair"), em_iterations(opt.ibm));
  const auto table = WordAligner::train(src, tgt, opt.ibm).lexical_table(static_cast<size_t>(opt.lex_best), 0.0);
  OutputFile out(opt.output);
  for (const auto& e : table) out.stream() << e.source << '\t' << e.target << '\t' << fmt::format("{:.6g}", e.prob) << '\n';
  out.commit();
  spdlog::info("lexical table: {} written", counted(static_cast<int64_t>(table.size()), "entry", "entries"));
}

}  // namespace nmt::align_detail
