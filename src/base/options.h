// Every option of nmt, with its default, in one place: this header includes
// one header per tool's options (each struct beside its field list):
//   runtime_options.h    --device, --threads (every tool)
//   model_options.h      the architecture, stored in checkpoints
//   train_options.h      nmt-train: tokenizer, distributed, the run, --release
//   translate_options.h  nmt-translate: search, shortlist, batching, the stream
//   align_options.h      nmt-align: the ibm2 aligner and the run
//   serve_options.h      nmt-serve: where it listens, its limits, its batching
// Each struct names its fields once, in fields() (see fields.h): that list
// gives the command-line flags and their help (apps/cli.h), the text form
// stored in checkpoints, lookup by name and each numeric field's range
// (check_ranges.h). The layers read typed fields, never string-keyed bags.
// Torch-free: validate() only checks ranges and combinations.
#pragma once

#include "base/align_options.h"
#include "base/fields.h"
#include "base/model_options.h"
#include "base/option_enums.h"
#include "base/runtime_options.h"
#include "base/serve_options.h"
#include "base/train_options.h"
#include "base/translate_options.h"
