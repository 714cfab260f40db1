// A pre-check of a GGUF header before llama.cpp's reader sees it. gguf.cpp reads each
// key-value type and each tensor type from the file straight into an enum and only then
// rejects an out-of-range value: undefined behaviour (UBSan's `enum` check, found by
// fuzz/fuzz_gguf and fuzz_imatrix; results/fuzz.md). This walks the header with bounds checks
// and refuses such values first, a header that ends where gguf.cpp would read a type (it then
// compares the enum it failed to fill), and any tensor that claims more bytes than the whole
// file (llama.cpp's imatrix loader allocates before checking: an abort). Anything else it cannot make sense of (truncation, bad
// version, too many dimensions) it leaves to gguf.cpp, whose own checks and messages hold.
#pragma once
#include <string>

#include "util/status.h"

namespace gm {

// kCorrupt naming the key or tensor whose type is out of range or whose size exceeds the
// file; ok otherwise.
Status check_gguf_enums(const std::string& path);

}  // namespace gm
