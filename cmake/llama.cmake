# The vendored llama.cpp of the pinned llama-cpp-python sdist (scripts/setup.sh unpacks it),
# built in-tree so gamma links ggml/llama statically and the tools come from the same source.
set(GAMMA_LLAMA_DIR "$ENV{HOME}/.cache/gamma/deps/llama-cpp-python-0.3.36/vendor/llama.cpp"
    CACHE PATH "llama.cpp source tree (vendor/llama.cpp of llama-cpp-python 0.3.36)")
if(NOT EXISTS "${GAMMA_LLAMA_DIR}/CMakeLists.txt")
  message(FATAL_ERROR "llama.cpp not found at ${GAMMA_LLAMA_DIR}: run scripts/setup.sh first")
endif()

set(BUILD_SHARED_LIBS OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_COMMON ON CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TOOLS ON CACHE BOOL "" FORCE)
set(LLAMA_BUILD_TESTS OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_EXAMPLES OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_SERVER OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_APP OFF CACHE BOOL "" FORCE)
set(LLAMA_OPENSSL OFF CACHE BOOL "" FORCE)
set(LLAMA_ALL_WARNINGS OFF CACHE BOOL "" FORCE)
set(LLAMA_BUILD_IS_DEV OFF CACHE BOOL "" FORCE)
include(${CMAKE_CURRENT_LIST_DIR}/cpu.cmake)  # instruction sets: never ggml's AMX matmul
# EXCLUDE_FROM_ALL: only what gamma links and the tools below are built.
add_subdirectory("${GAMMA_LLAMA_DIR}" "${CMAKE_BINARY_DIR}/llama.cpp" EXCLUDE_FROM_ALL)

# External judges of what gamma writes (tests call them by path).
set(GAMMA_LLAMA_TOOLS llama-perplexity llama-quantize llama-imatrix llama-bench llama-completion)
add_custom_target(llama_tools ALL DEPENDS ${GAMMA_LLAMA_TOOLS})
foreach(tool ${GAMMA_LLAMA_TOOLS})
  target_sources(${tool} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/llama_log_flush.cpp)
endforeach()
