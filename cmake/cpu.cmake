# Which x86-64 instruction sets the vendored ggml is compiled for.
#
# ggml's default, GGML_NATIVE (-march=native), compiles in whatever the build machine has, and
# on an Intel AMX CPU that includes ggml's AMX matmul, which segfaults at the first quantized
# matmul (llama.cpp #20824). gamma turns GGML_NATIVE off and names each extension instead:
#   GAMMA_CPU=auto      (default) every extension ggml uses that this CPU reports in
#                       /proc/cpuinfo and the compiler accepts, AMX never
#   GAMMA_CPU=portable  x86-64-v3 (SSE4.2, AVX, AVX2, FMA, F16C, BMI2): any x86-64 CPU since
#                       about 2015, for a build that is copied to other machines
#   GAMMA_CPU=native    ggml's own -march=native, AMX included: only to measure against
# The extensions are flags on the compile line, so ccache never serves objects of one CPU's
# build to another. Other architectures keep ggml's defaults (they have no AMX).
set(GAMMA_CPU auto CACHE STRING "ggml instruction sets: auto (this CPU minus AMX), portable (x86-64-v3) or native")
set_property(CACHE GAMMA_CPU PROPERTY STRINGS auto portable native)

# ggml option -> the /proc/cpuinfo flags it needs (all of them) -> the compiler flags it adds.
set(_gamma_isa
  "GGML_SSE42|sse4_2|-msse4.2"
  "GGML_AVX|avx|-mavx"
  "GGML_AVX2|avx2|-mavx2"
  "GGML_FMA|fma|-mfma"
  "GGML_F16C|f16c|-mf16c"
  "GGML_BMI2|bmi2|-mbmi2"
  "GGML_AVX_VNNI|avx_vnni|-mavxvnni"
  "GGML_AVX512|avx512f,avx512cd,avx512vl,avx512dq,avx512bw|-mavx512f"
  "GGML_AVX512_VBMI|avx512vbmi|-mavx512vbmi"
  "GGML_AVX512_VNNI|avx512_vnni|-mavx512vnni"
  "GGML_AVX512_BF16|avx512_bf16|-mavx512bf16")
set(_gamma_portable GGML_SSE42 GGML_AVX GGML_AVX2 GGML_FMA GGML_F16C GGML_BMI2)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  if(NOT GAMMA_CPU MATCHES "^(auto|portable|native)$")
    message(FATAL_ERROR "GAMMA_CPU must be auto, portable or native, not '${GAMMA_CPU}'")
  endif()
  foreach(amx GGML_AMX_TILE GGML_AMX_INT8 GGML_AMX_BF16)
    set(${amx} OFF CACHE BOOL "" FORCE)
  endforeach()
  if(GAMMA_CPU STREQUAL "native")
    set(GGML_NATIVE ON CACHE BOOL "" FORCE)
    message(STATUS "gamma: ggml built with -march=native (GAMMA_CPU=native; AMX if this CPU has it)")
  else()
    set(GGML_NATIVE OFF CACHE BOOL "" FORCE)
    set(_cpu_flags "")
    if(GAMMA_CPU STREQUAL "auto")
      if(NOT EXISTS /proc/cpuinfo)
        message(FATAL_ERROR "GAMMA_CPU=auto reads /proc/cpuinfo, which this machine lacks: use -DGAMMA_CPU=portable")
      endif()
      file(STRINGS /proc/cpuinfo _flags_line REGEX "^flags[ \t]*:" LIMIT_COUNT 1)
      string(REGEX REPLACE "^flags[ \t]*:[ \t]*" "" _flags_line "${_flags_line}")
      string(REPLACE " " ";" _cpu_flags "${_flags_line}")
    endif()
    include(CheckCXXCompilerFlag)
    set(_on "")
    foreach(entry ${_gamma_isa})
      string(REPLACE "|" ";" parts "${entry}")
      list(GET parts 0 opt)
      list(GET parts 1 needs)
      list(GET parts 2 cflag)
      set(want OFF)
      if(GAMMA_CPU STREQUAL "portable")
        if(opt IN_LIST _gamma_portable)
          set(want ON)
        endif()
      else()
        set(want ON)
        string(REPLACE "," ";" needs "${needs}")
        foreach(f ${needs})
          if(NOT f IN_LIST _cpu_flags)
            set(want OFF)
          endif()
        endforeach()
      endif()
      if(want)
        string(MAKE_C_IDENTIFIER "GAMMA_CC_HAS${cflag}" probe)
        check_cxx_compiler_flag(${cflag} ${probe})
        if(NOT ${probe})
          set(want OFF)
        endif()
      endif()
      set(${opt} ${want} CACHE BOOL "" FORCE)
      if(want)
        string(REPLACE "GGML_" "" short "${opt}")
        list(APPEND _on ${short})
      endif()
    endforeach()
    string(REPLACE ";" " " _on "${_on}")
    message(STATUS "gamma: ggml CPU (GAMMA_CPU=${GAMMA_CPU}): ${_on}; AMX off (llama.cpp #20824)")
  endif()
endif()
