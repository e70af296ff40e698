// What DFlash2 adds to a DFlash draft (the layers and loading stay in
// speculative/dflash.h): the grouped dynamic causal convolution run on a
// layer's input before attention and before the MLP and on their outputs,
// and the low-rank candidate selector that picks each drafted token among
// its position's top-k logits by how well it follows the token picked
// before it.
//
// Convolution, for block rows i and channels c (group g = c / group size):
//   dyn = kernel_projection(x) viewed as [2 sides][kernel taps][groups], made
//   from the sublayer's normed input and used on both of its sides;
//   y[i][c] = sum over taps t <= i of (base[side][t][c] + dyn[i][side][t][g]) * x[i-t][c]
// (causal inside the block; taps past its start read zeros).
// Selector, for the drafted rows in order (the first follows the anchor):
//   score(j) = logit(j) + sum_r predecessor[prev][r] * proj[r] * successor[j][r]
// over the row's top-k tokens j, proj = hidden_projection(the row's
// final-normed hidden state); the best scoring token is drafted and becomes
// prev.
// The format follows z-lab's DFlash2 model code as published in ports of it
// (tensor names, [side][tap][group] coefficient layout, selector on the
// logits after output_multiplier / softcapping). llama.cpp's implementation
// agrees on the math; it differs in that it runs the block at the drafted
// length (Pocket always runs the trained block_size: attention in the
// block is not causal, so a shorter block changes the logits), needs
// hidden >= top_k * (top_k + 1) (its packed output; no such limit here) and
// can stop a draft early on the selector's softmax confidence (here the
// block planner chooses the length).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace pocket {

struct Dflash2Conv {
  const TensorView* kernel_projection = nullptr;  // (2 * kernel * groups) x hidden
  std::vector<float> base;                        // [2][kernel][hidden]
};

struct Dflash2Selector {
  const TensorView* predecessor = nullptr;        // vocab x rank
  const TensorView* successor = nullptr;          // vocab x rank
  const TensorView* hidden_projection = nullptr;  // rank x hidden
};

// y (n x hidden) = the convolution of x (n x hidden, one block's rows from
// its start) on `side` (0: sublayer input, 1: its output) with dynamic
// coefficients dyn (n x 2*kernel*groups). y must not alias x.
void dflash2_conv(const Dflash2Conv& conv, int kernel, int group_size, int side, const float* dyn, const float* x,
                  int n, int hidden, float* y);

// The selector's walk over `rows` rows of logits (rows x width, column j is
// token ids[j], or j when ids is empty) with projected hidden states proj
// (rows x rank): one drafted token per row into out (cleared first). Ties
// go to the higher logit, then to the lower column.
void dflash2_select(const Dflash2Selector& s, int top_k, int32_t anchor, std::span<const float> logits, int rows,
                    int width, std::span<const int32_t> ids, std::span<const float> proj, int rank,
                    std::vector<int32_t>& out);

}  // namespace pocket
