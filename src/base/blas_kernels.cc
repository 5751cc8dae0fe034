// OpenBLAS kernel families: what the CPU can run, what OpenBLAS picked, and
// switching OpenBLAS to the widest family when it picked narrower.
#include "base/blas_kernels.h"

#include <dlfcn.h>
#include <strings.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include <cstdlib>
#include <utility>
#include <vector>

namespace nmt {
namespace {

constexpr const char* kChoiceVar = "NMT_OPENBLAS_CHOICE";          // what OpenBLAS had picked, set by the switch
constexpr const char* kTestOwnChoiceVar = "NMT_TEST_OPENBLAS_OWN_CHOICE";  // tests: pretend OpenBLAS picked this
std::string g_switch_failure;  // why the switch to the widest family failed, for the log

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
bool bit(unsigned value, int b) { return ((value >> b) & 1u) != 0; }

// The OS-enabled state components (XCR0); 0 where XSAVE is not enabled.
unsigned long long xcr0() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !bit(c, 27)) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
#endif

// Families in the order best_blas_family() tries them, with their symbol in
// a DYNAMIC_ARCH OpenBLAS.
const std::vector<std::pair<const char*, const char*>>& candidate_families() {
  static const std::vector<std::pair<const char*, const char*>> families = {
      {"SapphireRapids", "gotoblas_SAPPHIRERAPIDS"}, {"Cooperlake", "gotoblas_COOPERLAKE"},
      {"SkylakeX", "gotoblas_SKYLAKEX"},             {"Haswell", "gotoblas_HASWELL"},
      {"Sandybridge", "gotoblas_SANDYBRIDGE"},       {"Nehalem", "gotoblas_NEHALEM"}};
  return families;
}

bool library_has_family(const std::string& family) {
  for (const auto& [name, symbol] : candidate_families())
    if (family == name) return dlsym(RTLD_DEFAULT, symbol) != nullptr;
  return false;
}

// What openblas_get_corename() says, or "" when the BLAS is not OpenBLAS.
std::string openblas_family() {
  using CoreFn = char* (*)();
  auto fn = reinterpret_cast<CoreFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

// "OpenBLAS 0.3.21" from openblas_get_config(), or "" when it is missing.
std::string openblas_library() {
  using ConfigFn = char* (*)();
  auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const char* config = fn ? fn() : nullptr;
  if (config == nullptr) return "";
  std::string s = config;
  const size_t first = s.find(' ');
  const size_t second = first == std::string::npos ? first : s.find(' ', first + 1);
  return second == std::string::npos ? s : s.substr(0, second);
}

bool same_name(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

// Has a DYNAMIC_ARCH OpenBLAS pick its kernel family again, as it does when it
// loads (reading OPENBLAS_CORETYPE). Returns false when the library has no
// such functions. Only before the first product: the tables of the family
// picked before are not used again.
bool openblas_pick_again() {
  using VoidFn = void (*)();
  auto quit = reinterpret_cast<VoidFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  auto init = reinterpret_cast<VoidFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return false;
  quit();  // forgets the family, so that init() picks one
  init();
  return true;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

CpuFeatures CpuFeatures::detect() {
  CpuFeatures f;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const unsigned ecx1 = c;
  const unsigned long long os = xcr0();
  const bool ymm = (os & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm = (os & 0xE6) == 0xE6;   // and opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (os & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  f.sse42 = bit(ecx1, 20);
  f.avx = bit(ecx1, 28) && ymm;
  unsigned ebx7 = 0, edx7 = 0, eax71 = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    ebx7 = b;
    edx7 = d;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) eax71 = a;
  }
  f.avx2 = f.avx && bit(ebx7, 5) && bit(ecx1, 12);  // AVX2 and FMA
  f.avx512 = f.avx2 && zmm && bit(ebx7, 16) && bit(ebx7, 17) && bit(ebx7, 28) && bit(ebx7, 30) && bit(ebx7, 31);
  f.avx512_bf16 = f.avx512 && bit(eax71, 5);
  f.amx = f.avx512_bf16 && tiles && bit(edx7, 22) && bit(edx7, 24);  // AMX-BF16, AMX-TILE
#endif
  return f;
}

std::string CpuFeatures::describe() const {
  if (avx512) {
    std::string s = "AVX-512";
    if (avx512_bf16) s += amx ? " with BF16 and AMX" : " with BF16";
    return s;
  }
  if (avx2) return "AVX2";
  if (avx) return "AVX";
  return sse42 ? "SSE4.2" : "no SSE4.2";
}

int blas_family_rank(const std::string& family) {
  static const std::vector<std::pair<const char*, int>> ranks = {
      {"Prescott", 0},    {"Core2", 0},      {"Penryn", 0},          {"Dunnington", 0}, {"Atom", 0},
      {"Nano", 0},        {"Opteron", 0},    {"Opteron_SSE3", 0},    {"Barcelona", 0},  {"Bobcat", 0},
      {"Katmai", 0},      {"Coppermine", 0}, {"Northwood", 0},       {"Banias", 0},     {"Athlon", 0},
      {"Unknown", 0},     {"Nehalem", 1},    {"Sandybridge", 2},     {"Bulldozer", 2},  {"Piledriver", 2},
      {"Steamroller", 2}, {"Haswell", 3},    {"Zen", 3},             {"Excavator", 3},  {"SkylakeX", 4},
      {"Cooperlake", 5},  {"SapphireRapids", 6}};
  for (const auto& [name, rank] : ranks)
    if (same_name(family, name)) return rank;
  return -1;
}

std::string best_blas_family(const CpuFeatures& cpu, const std::function<bool(const std::string&)>& has_family) {
  const bool runs[] = {cpu.amx, cpu.avx512_bf16, cpu.avx512, cpu.avx2, cpu.avx, cpu.sse42};
  const auto& families = candidate_families();
  for (size_t i = 0; i < families.size(); ++i)
    if (runs[i] && has_family(families[i].first)) return families[i].first;
  return "";
}

BlasKernels blas_kernels() {
  BlasKernels k;
  k.family = openblas_family();
  if (k.family.empty()) return k;
  k.library = openblas_library();
  if (k.library.empty()) k.library = "OpenBLAS";
  const std::string forced = env("OPENBLAS_CORETYPE"), own = env(kChoiceVar);
  if (!g_switch_failure.empty()) {
    k.how = "OpenBLAS's own choice";
    k.warning = g_switch_failure;
  } else if (forced.empty()) {
    k.how = "OpenBLAS's own choice";
  } else if (own.empty()) {
    k.how = "set by OPENBLAS_CORETYPE";
    // The user's choice stands, but a narrower one than the CPU runs is named:
    // Haswell kernels trained at 0.69x the Cooperlake ones' speed on an AVX-512 VM.
    const std::string best = best_blas_family(CpuFeatures::detect(), library_has_family);
    const int rank = blas_family_rank(k.family);
    if (!best.empty() && rank >= 0 && rank < blas_family_rank(best)) k.wider = best;
  } else {
    k.chosen_by_nmt = true;
    k.how = "chosen by nmt: OpenBLAS picked " + own + " on this CPU (" + CpuFeatures::detect().describe() + ")";
    if (!same_name(k.family, forced))
      k.warning = "nmt asked OpenBLAS for " + forced + " kernels, but it runs " + k.family;
  }
  return k;
}

namespace {

// The family OpenBLAS picked by itself (NMT_TEST_OPENBLAS_OWN_CHOICE stands in
// for it in tests); "" when the BLAS is not OpenBLAS.
std::string own_choice() {
  const std::string own = openblas_family();
  const std::string test = env(kTestOwnChoiceVar);
  return own.empty() || test.empty() ? own : test;
}

// The family ensure_best_blas_kernels() switches OpenBLAS to under the present
// environment; "" when it has nothing to do. Never fails.
std::string blas_switch_family() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv(kChoiceVar) != nullptr) return "";
  const std::string own = own_choice();
  if (own.empty()) return "";  // not OpenBLAS
  const std::string best = best_blas_family(CpuFeatures::detect(), library_has_family);
  if (best.empty() || blas_family_rank(own) >= blas_family_rank(best)) return "";
  return best;
}

}  // namespace

void ensure_best_blas_kernels() {
  const std::string best = blas_switch_family();
  if (best.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", best.c_str(), 1) != 0 || setenv(kChoiceVar, own_choice().c_str(), 1) != 0) return;
  const bool picked = openblas_pick_again();
  if (picked && same_name(openblas_family(), best)) return;
  // The library cannot pick again, or took another family: back to its own choice.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kChoiceVar);
  const std::string took = picked ? openblas_family() : "";
  if (picked) openblas_pick_again();
  g_switch_failure = (picked ? "OpenBLAS took " + took + " kernels when nmt asked for " + best
                             : "this OpenBLAS cannot switch kernels once loaded (no gotoblas_dynamic_init)") +
                     "; it runs its own " + openblas_family() + " kernels on this CPU (" +
                     CpuFeatures::detect().describe() + "): set OPENBLAS_CORETYPE=" + best + " for full speed";
}

std::string blas_choice_log_line() {
  const BlasKernels k = blas_kernels();
  if (!k.warning.empty()) return "BLAS: " + k.warning;
  if (!k.wider.empty())
    return "BLAS: OPENBLAS_CORETYPE=" + env("OPENBLAS_CORETYPE") + " keeps " + k.library + " on its " + k.family +
           " kernels; this CPU (" + CpuFeatures::detect().describe() + ") can run its wider " + k.wider +
           " kernels (unset OPENBLAS_CORETYPE for them)";
  if (!k.chosen_by_nmt) return "";
  return "BLAS: " + k.library + " picked its " + env(kChoiceVar) + " kernels on this CPU (" +
         CpuFeatures::detect().describe() + "); nmt runs its " + k.family +
         " kernels instead, the widest it has for this CPU (set OPENBLAS_CORETYPE to choose yourself)";
}

}  // namespace nmt
