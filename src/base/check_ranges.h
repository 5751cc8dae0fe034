// The one range check of the options structs: walks a struct's fields() and
// checks each field that declares a range (Field::at_least, above, within)
// with check::in_range, naming it as the user spells it. validate() calls it
// first and keeps only the rules between options and the checks that are
// not plain ranges.
#pragma once
#include <string>
#include <type_traits>

#include "base/error.h"
#include "base/fields.h"
#include "base/validate.h"

namespace nmt {

// How check_ranges names a field in its messages.
enum class OptionNaming {
  kFlag,      // "--emb-dim": the tools' options (the flag is also the config-file key)
  kModelKey,  // "model option emb_dim": ModelOptions, as checkpoints store it
};

// Checks every ranged field of `s` (those of the structs it includes too), in
// the order fields() lists them. Throws nmt::UsageError for the first value
// out of its range, e.g. "--beam-size must be between 1 and 256, got 0";
// nmt::Error for a range declared on a field that is not a number.
template <class S>
void check_ranges(const S& s, OptionNaming naming = OptionNaming::kFlag) {
  S::fields(s, [naming](const Field& f, const auto& value) {
    if (!f.range) return;
    const std::string name =
        naming == OptionNaming::kFlag ? std::string("--") + f.name : "model option " + underscored(f.name);
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      check::in_range(name.c_str(), value, *f.range);
    else
      throw Error("option " + name + " declares a range but is not a number");
  });
}

}  // namespace nmt
