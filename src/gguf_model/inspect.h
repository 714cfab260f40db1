// What `gamma inspect` shows of a model, as JSON: architecture, every linear module (shape,
// type, bytes, bpw, the candidate types its rows admit), every tensor, and the totals.
#pragma once
#include "gguf_model/model.h"
#include "util/json.h"

namespace gm {

json describe_model(const Model& m, const std::string& path);

}  // namespace gm
