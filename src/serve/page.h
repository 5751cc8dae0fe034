// The page nmt-serve gives at GET /: one self-contained HTML document (its
// CSS and JavaScript inline; nothing fetched from elsewhere) with a text box,
// the translation, and the attention matrix as a grayscale heatmap (weight 0
// black, 1 white; source across the top, target down the side, as in
// Bahdanau et al.'s Figure 3 and nmt-align --format svg), at piece or word
// level; hovering a cell shows both tokens and the weight.
#pragma once
#include <string>

namespace nmt {

// The page's HTML. Never throws (beyond std::bad_alloc).
const std::string& page_html();

}  // namespace nmt
