// Precompiled header for the LibTorch-facing sources: the expensive includes,
// parsed once per build instead of once per file.
#pragma once
#include <torch/nn.h>
#include <torch/optim.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <ATen/ATen.h>
