#include "eval/layer_states.h"

#include <algorithm>

namespace gm::eval {

LayerStates::LayerStates(int n_layer, int n_chunks, int n_ctx, int64_t n_embd)
    : n_layer_(n_layer), n_chunks_(n_chunks), n_ctx_(n_ctx), n_embd_(n_embd) {
  const int n = std::max(0, n_layer - 1);
  data_.resize(size_t(n));
  written_.assign(size_t(n) * size_t(std::max(0, n_chunks)), 0);
}

float* LayerStates::at(int boundary, int chunk) {
  if (boundary < 1 || boundary >= n_layer_ || chunk < 0 || chunk >= n_chunks_) return nullptr;
  auto& v = data_[size_t(boundary - 1)];
  const size_t per_chunk = size_t(n_ctx_) * size_t(n_embd_);
  if (v.empty()) v.resize(size_t(n_chunks_) * per_chunk);  // a boundary's memory when first written
  return v.data() + size_t(chunk) * per_chunk;
}

const float* LayerStates::at(int boundary, int chunk) const {
  if (boundary < 1 || boundary >= n_layer_ || chunk < 0 || chunk >= n_chunks_) return nullptr;
  const auto& v = data_[size_t(boundary - 1)];
  if (v.empty()) return nullptr;
  return v.data() + size_t(chunk) * size_t(n_ctx_) * size_t(n_embd_);
}

void LayerStates::mark(int boundary, int chunk) {
  if (boundary < 1 || boundary >= n_layer_ || chunk < 0 || chunk >= n_chunks_) return;
  written_[size_t(boundary - 1) * size_t(n_chunks_) + size_t(chunk)] = 1;
}

bool LayerStates::complete() const {
  return std::all_of(written_.begin(), written_.end(), [](uint8_t w) { return w != 0; });
}

}  // namespace gm::eval
