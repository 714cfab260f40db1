// Seeds for fuzz_gguf_header: small GGUFs with the tensor layouts of the architectures beyond
// llama (MoE experts as 3-D tensors with a router, a fused attn_qkv, MLA's kv projections, a
// gemma3 layer with its extra norms, quantized blocks), each a well-formed file the reader
// accepts, so mutations start inside every branch of it. Usage: gguf_seeds DIR.
#include <cstdio>
#include <string>
#include <vector>

#include "gguf.h"
#include "gguf_model/writer.h"

namespace {

struct Layout {
  const char* file;
  const char* arch;
  std::vector<gm::OutTensor> tensors;
};

gm::Status write(const std::string& dir, const Layout& l) {
  gm::GgufWriter w;
  gguf_set_val_str(w.gguf(), "general.architecture", l.arch);
  gguf_set_val_u32(w.gguf(), (std::string(l.arch) + ".block_count").c_str(), 1);
  gguf_set_val_u32(w.gguf(), (std::string(l.arch) + ".embedding_length").c_str(), 256);
  for (const auto& t : l.tensors) w.add(t);
  return w.write(dir + "/" + l.file, [&](size_t i, std::vector<uint8_t>& b) {
    b.assign(w.tensors()[i].nbytes(), 0);
    for (size_t k = 0; k < b.size(); ++k) b[k] = uint8_t(k * 37 + i);  // not all zero: scales, signs
    return gm::Status::ok();
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_seeds DIR\n");
    return 2;
  }
  const ggml_type F32 = GGML_TYPE_F32, Q4K = GGML_TYPE_Q4_K, Q8 = GGML_TYPE_Q8_0, F16 = GGML_TYPE_F16;
  const std::vector<Layout> layouts = {
      {"qwen3moe.gguf", "qwen3moe",
       {{"token_embd.weight", Q8, {256, 8}},
        {"blk.0.attn_norm.weight", F32, {256}},
        {"blk.0.attn_q.weight", Q4K, {256, 4}},
        {"blk.0.attn_k.weight", Q4K, {256, 2}},
        {"blk.0.attn_v.weight", Q8, {256, 2}},
        {"blk.0.attn_output.weight", Q4K, {256, 4}},
        {"blk.0.ffn_gate_inp.weight", F32, {256, 4}},  // the router: llama-quantize leaves it alone
        {"blk.0.ffn_gate_exps.weight", Q4K, {256, 8, 4}},
        {"blk.0.ffn_up_exps.weight", Q4K, {256, 8, 4}},
        {"blk.0.ffn_down_exps.weight", Q8, {8 * 32, 256, 4}},
        {"blk.0.ffn_gate_shexp.weight", Q4K, {256, 8}},
        {"output_norm.weight", F32, {256}},
        {"output.weight", Q8, {256, 8}}}},
      {"phi3.gguf", "phi3",
       {{"token_embd.weight", F16, {256, 8}},
        {"blk.0.attn_qkv.weight", Q4K, {256, 12}},
        {"blk.0.attn_output.weight", Q4K, {256, 4}},
        {"blk.0.ffn_up.weight", Q8, {256, 16}},
        {"blk.0.ffn_down.weight", Q8, {256, 256}},
        {"output.weight", Q8, {256, 8}}}},
      {"deepseek2.gguf", "deepseek2",
       {{"token_embd.weight", Q8, {256, 8}},
        {"blk.0.attn_q.weight", Q4K, {256, 4}},
        {"blk.0.attn_kv_a_mqa.weight", Q8, {256, 2}},
        {"blk.0.attn_kv_a_norm.weight", F32, {64}},
        {"blk.0.attn_kv_b.weight", Q8, {64, 8}},
        {"blk.0.attn_output.weight", Q4K, {256, 4}},
        {"blk.0.ffn_gate.weight", Q4K, {256, 8}}}},
      {"gemma3.gguf", "gemma3",
       {{"token_embd.weight", Q8, {256, 16}},
        {"blk.0.attn_norm.weight", F32, {256}},
        {"blk.0.attn_q.weight", Q8, {256, 4}},
        {"blk.0.attn_q_norm.weight", F32, {64}},
        {"blk.0.attn_k.weight", Q8, {256, 2}},
        {"blk.0.attn_k_norm.weight", F32, {64}},
        {"blk.0.attn_v.weight", Q8, {256, 2}},
        {"blk.0.attn_output.weight", Q8, {256, 4}},
        {"blk.0.post_attention_norm.weight", F32, {256}},
        {"blk.0.ffn_gate.weight", Q4K, {256, 8}},
        {"blk.0.ffn_up.weight", Q4K, {256, 8}},
        {"blk.0.ffn_down.weight", Q8, {256, 256}},
        {"blk.0.post_ffw_norm.weight", F32, {256}}}},
  };
  for (const auto& l : layouts) {
    gm::Status st = write(argv[1], l);
    if (!st.is_ok()) {
      std::fprintf(stderr, "gguf_seeds: %s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}
