// Versioned JSON files between stages: every file carries {"schema": NAME, "version": N}.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace gm {

using json = nlohmann::ordered_json;

// Parses `path`, checks schema name and version (a newer major version is refused).
Result<json> read_json(const std::string& path, const std::string& schema, int max_version);
// Pretty-prints and writes atomically.
Status write_json(const std::string& path, const json& j);
json json_header(const std::string& schema, int version);

}  // namespace gm
