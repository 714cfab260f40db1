// The one way gamma starts libllama: the backend initialised once per process, and model
// parameters that keep ggml's AMX matmul out of every context (it segfaults at the first
// quantized matmul, llama.cpp #20824). gamma's own build compiles no AMX kernels
// (cmake/cpu.cmake); this guard also covers a ggml built elsewhere that has them.
#pragma once
#include <string>
#include <vector>

#include "llama.h"

namespace gm::llama {

// llama_backend_init once, after installing the log sink (llama/log.h); on first use checks
// the CPU against the build. Fails the process (one line, exit 1) when ggml was compiled for
// an extension this CPU lacks (a build copied from another machine), which would otherwise
// die of SIGILL.
void init();

// What this machine's ggml deliberately leaves unused, for reports of its speed (gamma speed,
// the dry run): the CPU has AMX that ggml does not use, or this ggml lists an AMX buffer type
// (then extra buffer types are turned off, see model_params). Empty otherwise.
std::string cpu_note();

// llama_model_default_params for CPU inference: no GPU layers, and use_extra_bufts off when
// ggml's CPU backend offers an AMX buffer type (otherwise on: the repacked Q4_0/IQ4_NL
// kernels are faster and safe).
llama_model_params model_params();

// The CPU reports AMX (cpuid leaf 7: AMX-TILE and AMX-INT8).
bool cpu_has_amx();
// ggml's CPU backend lists an AMX extra buffer type (AMX kernels compiled in and usable).
bool ggml_offers_amx();
// Each x86 extension ggml-cpu can use: compiled into this binary, and reported by the CPU.
struct CpuFeature {
  std::string name;  // as ggml names it: "AVX2", "AVX512_VNNI", "AMX_INT8", ...
  bool compiled = false, cpu = false;
};
std::vector<CpuFeature> cpu_features();

}  // namespace gm::llama
