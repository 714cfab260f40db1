// Hidden states between layers, kept from one evaluation for the next (gamma layers). A file that
// differs from the base file only from layer L on computes, up to layer L, exactly what the base
// file computed: so the base file's evaluation keeps each chunk's state after every layer, and the
// layer-L file is evaluated from the state at its input, as a model of the layers from L on
// (emit's first_layer). Qwen2.5-1.5B's 29 files then run 0.56x the layer-token work.
//
// The evaluation runs one chunk per decode (n_batch = n_ctx) in one ubatch, so a chunk's state is
// its n_ctx rows in position order, and the layers after L see the very rows the base file's did.
// Held in memory, F32 (the layers after L must see exactly what the base file's saw): (n_layer - 1)
// x chunks x n_ctx x n_embd floats, Qwen2.5-1.5B's 4 x 512 tokens 340 MB, a 70B's 5.3 GB.
#pragma once
#include <cstdint>
#include <vector>

namespace gm::eval {

class LayerStates {
 public:
  // Boundaries 1 .. n_layer - 1 of n_chunks chunks of n_ctx tokens, n_embd floats a token.
  LayerStates(int n_layer, int n_chunks, int n_ctx, int64_t n_embd);
  int n_layer() const { return n_layer_; }
  int n_chunks() const { return n_chunks_; }
  int n_ctx() const { return n_ctx_; }
  int64_t n_embd() const { return n_embd_; }
  // Boundary b is the output of layer b - 1 and the input of layer b; null outside 1..n_layer-1
  // or past the chunks.
  float* at(int boundary, int chunk);
  const float* at(int boundary, int chunk) const;
  // Records that `chunk`'s state at `boundary` was written; complete() once every one was.
  void mark(int boundary, int chunk);
  bool complete() const;

 private:
  int n_layer_, n_chunks_, n_ctx_;
  int64_t n_embd_;
  std::vector<std::vector<float>> data_;  // per boundary - 1: n_chunks x n_ctx x n_embd
  std::vector<uint8_t> written_;          // per (boundary - 1, chunk)
};

}  // namespace gm::eval
