#include "util/json.h"

#include "util/files.h"

namespace gm {

json json_header(const std::string& schema, int version) {
  json j = json::object();
  j["schema"] = schema;
  j["version"] = version;
  return j;
}

Result<json> read_json(const std::string& path, const std::string& schema, int max_version) {
  GAMMA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::errorf(Status::Code::kCorrupt, "{}: malformed JSON", path);
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string())
    return Status::errorf(Status::Code::kCorrupt, "{}: not a gamma file (no \"schema\" field; expected {})", path, schema);
  if (j["schema"].get<std::string>() != schema)
    return Status::errorf(Status::Code::kCorrupt, "{}: schema is {}, expected {}", path, j["schema"].get<std::string>(), schema);
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Status::errorf(Status::Code::kCorrupt, "{}: missing integer \"version\"", path);
  int v = j["version"].get<int>();
  if (v < 1 || v > max_version)
    return Status::errorf(Status::Code::kCorrupt, "{}: {} version {} is not supported (this gamma reads up to {})", path, schema, v, max_version);
  return j;
}

Status write_json(const std::string& path, const json& j) {
  return write_file_atomic(path, j.dump(1) + "\n");
}

}  // namespace gm
