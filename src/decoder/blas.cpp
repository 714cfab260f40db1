#include "decoder/blas.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace gm {

std::string blas_kernel() {
  // Looked up at run time: which BLAS serves libblas.so.3 is a system choice (alternatives).
  using CorenameFn = char* (*)();
  auto f = reinterpret_cast<CorenameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = f ? f() : nullptr;
  return name ? name : "";
}

CpuVectorUnits cpu_vector_units() {
  CpuVectorUnits c;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  c.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  c.avx512 = c.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
  return c;
}

std::string better_blas_kernel(const std::string& current, const CpuVectorUnits& cpu) {
  if (current.empty() || !cpu.avx2_fma) return "";
  std::string k = current;
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  // OpenBLAS's kernel sets that use AVX2 and FMA or wider (its names, lower-cased). Any of them
  // is the library's own informed choice and stays; only an older set is replaced.
  for (const char* modern : {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (k == modern) return "";
  return cpu.avx512 ? "SkylakeX" : "Haswell";
}

void reexec_for_blas_kernel(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's (or an earlier exec's) choice
  const std::string want = better_blas_kernel(blas_kernel(), cpu_vector_units());
  if (want.empty()) return;
  setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
  execv("/proc/self/exe", argv);
  // Still here: the exec failed. Go on with the slow kernels; children may still use the variable.
}

}  // namespace gm
