// How well per-kernel times add up to a model's: for each GGUF given, the decode time of all its
// weight matrices in one ggml graph (file order, each weight once: one token's matmuls), the
// sum of the same kernels timed alone (the speed model's assumption), and llama-bench tg128.
// Prints JSON: {"files": [{file, chain_us, sum_us, sum_over_chain, bench_us, rest_us}]}.
//   bench_speed [-t THREADS] FILE.gguf...
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf_model/model.h"
#include "speed/speed.h"
#include "util/json.h"
#include "util/threads.h"

int main(int argc, char** argv) {
  int threads = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-t") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else files.push_back(argv[i]);
  }
  threads = gm::resolve_threads(threads);
  auto cm = gm::speed::CostModel::open(threads);
  if (!cm.is_ok()) return std::fprintf(stderr, "%s\n", cm.status().message().c_str()), 1;
  gm::json out = {{"threads", threads}, {"machine", gm::speed::kernel_signature()}, {"files", gm::json::array()}};
  for (const auto& f : files) {
    auto model = gm::Model::open(f);
    if (!model.is_ok()) return std::fprintf(stderr, "%s\n", model.status().message().c_str()), 1;
    auto ws = gm::speed::weights_of(**model);
    if (!ws.is_ok()) return std::fprintf(stderr, "%s\n", ws.status().message().c_str()), 1;
    std::vector<gm::speed::MatSpec> chain;
    for (const auto& w : *ws) chain.push_back({w.type, w.n_in, w.n_out});
    auto chain_s = gm::speed::time_chain(chain, 1, 9, threads);
    auto sum = cm->weights_time(*ws);
    auto b = gm::speed::bench(std::string(GAMMA_LLAMA_BIN) + "/llama-bench", f, threads, 3);
    if (!chain_s.is_ok() || !sum.is_ok() || !b.is_ok()) return std::fprintf(stderr, "measurement failed\n"), 1;
    const double chain_us = *chain_s * 1e6;
    out["files"].push_back({{"file", f},
                            {"chain_us", chain_us},
                            {"sum_us", sum->decode_us},
                            {"sum_over_chain", sum->decode_us / chain_us},
                            {"bench_us", b->decode_us()},
                            {"rest_us", b->decode_us() - chain_us}});
    std::fprintf(stderr, "%s: chain %.0f us, sum of kernels %.0f us, llama-bench %.0f us\n", f.c_str(), chain_us,
                 sum->decode_us, b->decode_us());
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
