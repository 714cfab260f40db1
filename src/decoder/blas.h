#pragma once
// The BLAS kernels behind LibTorch's matmuls (Stage I, HAWQ-V2, the decoder checks).
//
// Debian's LibTorch calls the system BLAS (libblas.so.3, OpenBLAS 0.3.21 by default), which
// picks its kernels from the CPU model when it is loaded, before main. A CPU newer than the
// library (the Xeon of family 6 model 207 this project ran on, AVX-512 and AMX) is unknown to
// it and gets the SSE3 "Prescott" fallback: sgemm of Qwen-1.5B's FFN shape at 28 GFLOPS on one
// core instead of 145 with its SkylakeX kernels (measured here), and the LibTorch stages of
// the default job at 1.6-3.7x their time. OPENBLAS_CORETYPE overrides the choice, but only
// when read at load time, so gamma-learn executes itself again with it set.
#include <string>

namespace gm {

// The kernel set OpenBLAS runs in this process ("Prescott", "SkylakeX", ...); "" when the BLAS
// is not OpenBLAS.
std::string blas_kernel();

// What CPUID says the CPU can run.
struct CpuVectorUnits {
  bool avx2_fma = false;  // AVX2 and FMA: OpenBLAS's Haswell kernels
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL: its SkylakeX kernels
};
CpuVectorUnits cpu_vector_units();

// The OPENBLAS_CORETYPE to ask for when `current` is a kernel set older than what the CPU runs
// (pre-AVX2 on an AVX2 CPU); "" when `current` already uses the CPU's vector units, is not
// OpenBLAS (""), or the CPU has no AVX2.
std::string better_blas_kernel(const std::string& current, const CpuVectorUnits& cpu);

// Executes /proc/self/exe again with the same arguments and OPENBLAS_CORETYPE set when
// better_blas_kernel() names one and the user has not set OPENBLAS_CORETYPE; returns otherwise
// (also when the exec fails: the run is then slower, not wrong).
void reexec_for_blas_kernel(char** argv);

}  // namespace gm
