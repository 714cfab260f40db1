#include "llama/backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gm::llama {
namespace {

// A ggml CPU extension: whether ggml-cpu was compiled with it, and where cpuid reports it.
struct Feature {
  const char* name;
  int (*compiled)();
  unsigned leaf, subleaf, reg, bit;  // reg: 0 eax, 1 ebx, 2 ecx, 3 edx
};

#if defined(__x86_64__) || defined(__i386__)
const Feature kFeatures[] = {
    {"AVX", ggml_cpu_has_avx, 1, 0, 2, 28},
    {"FMA", ggml_cpu_has_fma, 1, 0, 2, 12},
    {"F16C", ggml_cpu_has_f16c, 1, 0, 2, 29},
    {"AVX2", ggml_cpu_has_avx2, 7, 0, 1, 5},
    {"BMI2", ggml_cpu_has_bmi2, 7, 0, 1, 8},
    {"AVX512", ggml_cpu_has_avx512, 7, 0, 1, 16},
    {"AVX512_VBMI", ggml_cpu_has_avx512_vbmi, 7, 0, 2, 1},
    {"AVX512_VNNI", ggml_cpu_has_avx512_vnni, 7, 0, 2, 11},
    {"AVX_VNNI", ggml_cpu_has_avx_vnni, 7, 1, 0, 4},
    {"AVX512_BF16", ggml_cpu_has_avx512_bf16, 7, 1, 0, 5},
    {"AMX_INT8", ggml_cpu_has_amx_int8, 7, 0, 3, 25},
};

bool cpuid_bit(unsigned leaf, unsigned subleaf, unsigned reg, unsigned bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
#endif

// Checks the build against this CPU: an extension compiled in that the CPU lacks fails the
// process. What is deliberately left unused (AMX) is cpu_note()'s, for the commands that report
// on this machine's speed; printed here it made every command's one-line error two lines.
void check_cpu() {
  for (const auto& f : cpu_features()) {
    if (f.compiled && !f.cpu) {
      std::fprintf(stderr,
                   "gamma: error: this build's ggml uses %s, which this CPU lacks (built on another machine?): "
                   "rebuild here, or configure with -DGAMMA_CPU=portable\n",
                   f.name.c_str());
      std::exit(1);
    }
  }
}

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    capture_logs();
    llama_backend_init();
    check_cpu();
  });
}

std::string cpu_note() {
  if (ggml_offers_amx())
    return "this ggml has AMX kernels, which crash (llama.cpp #20824): extra buffer types (AMX, repack) are off";
  if (cpu_has_amx()) return "the CPU has AMX; ggml is built without its AMX matmul (llama.cpp #20824)";
  return "";
}

bool cpu_has_amx() {
#if defined(__x86_64__) || defined(__i386__)
  return cpuid_bit(7, 0, 3, 24) && cpuid_bit(7, 0, 3, 25);  // AMX-TILE, AMX-INT8
#else
  return false;
#endif
}

bool ggml_offers_amx() {
  static const bool offers = [] {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) return false;
    auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
    if (!get) return false;
    for (ggml_backend_buffer_type_t* b = get(cpu); b && *b; ++b)
      if (std::strstr(ggml_backend_buft_name(*b), "AMX")) return true;
    return false;
  }();
  return offers;
}

std::vector<CpuFeature> cpu_features() {
  std::vector<CpuFeature> out;
#if defined(__x86_64__) || defined(__i386__)
  for (const auto& f : kFeatures) out.push_back({f.name, f.compiled() != 0, cpuid_bit(f.leaf, f.subleaf, f.reg, f.bit)});
#endif
  return out;
}

llama_model_params model_params() {
  init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  if (ggml_offers_amx()) mp.use_extra_bufts = false;
  return mp;
}

}  // namespace gm::llama
