#include "util/json.h"

#include <cmath>

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

FieldReader::FieldReader(const json& j, Status* status, std::string path)
    : j_(j.is_null() ? nullptr : &j), st_(status), path_(std::move(path)) {
  if (j_ && !j_->is_object()) {
    fail("not an object");
    j_ = nullptr;
  }
}

const json* FieldReader::field(const char* key) const {
  if (!j_) return nullptr;
  auto it = j_->find(key);
  return it == j_->end() || it->is_null() ? nullptr : &*it;
}

bool FieldReader::has(const char* key) const { return field(key) != nullptr; }

std::string FieldReader::where(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

void FieldReader::fail(const std::string& what) const {
  if (st_->is_ok()) *st_ = Status::error(path_.empty() ? what : path_ + ": " + what, Status::Code::kCorrupt);
}

void FieldReader::bad(const char* key, const char* what) const {
  if (st_->is_ok()) *st_ = Status::errorf(Status::Code::kCorrupt, "field '{}' {}", where(key), what);
}

FieldReader FieldReader::object(const char* key) const {
  static const json null;
  const json* f = field(key);
  if (f && !f->is_object()) bad(key, "is not an object");
  return FieldReader(f && f->is_object() ? *f : null, st_, where(key));
}

std::vector<FieldReader> FieldReader::elements(const char* key) const {
  std::vector<FieldReader> out;
  const json* f = field(key);
  if (!f) return out;
  if (!f->is_array()) {
    bad(key, "is not an array");
    return out;
  }
  for (size_t i = 0; i < f->size(); ++i) out.emplace_back((*f)[i], st_, fmt::format("{}[{}]", where(key), i));
  return out;
}

std::vector<std::pair<std::string, FieldReader>> FieldReader::members() const {
  static const json null;
  std::vector<std::pair<std::string, FieldReader>> out;
  if (j_)
    for (const auto& [k, v] : j_->items())
      out.emplace_back(k, FieldReader(v.is_object() ? v : null, st_, where(k.c_str())));
  return out;
}

void FieldReader::get(const char* key, std::optional<double>* out) const {
  const json* f = field(key);
  if (!f) return;
  if (!f->is_number()) return bad(key, "is not a number");
  if (!std::isfinite(f->get<double>())) return bad(key, "is not finite");
  *out = f->get<double>();
}

void FieldReader::get(const char* key, std::optional<std::vector<double>>* out) const {
  const json* f = field(key);
  if (!f) return;
  if (!f->is_array()) return bad(key, "is not an array");
  std::vector<double> v;
  for (const auto& x : *f) {
    if (!x.is_number() || !std::isfinite(x.get<double>())) return bad(key, "holds an element that is not a finite number");
    v.push_back(x.get<double>());
  }
  *out = std::move(v);
}

void FieldReader::get(const char* key, std::optional<uint64_t>* out) const {
  const json* f = field(key);
  if (!f) return;
  if (!f->is_number()) return bad(key, "is not a number");
  if (f->is_number_unsigned()) return void(*out = f->get<uint64_t>());
  const double v = f->get<double>();
  if (v < 0) return bad(key, "is negative");
  if (!std::isfinite(v) || v != std::floor(v) || v >= 18446744073709551616.0) return bad(key, "is not a whole number");
  *out = uint64_t(v);
}

void FieldReader::get(const char* key, std::optional<std::string>* out) const {
  const json* f = field(key);
  if (!f) return;
  if (!f->is_string()) return bad(key, "is not a string");
  *out = f->get<std::string>();
}

void FieldReader::get(const char* key, std::optional<bool>* out) const {
  const json* f = field(key);
  if (!f) return;
  if (!f->is_boolean()) return bad(key, "is not true or false");
  *out = f->get<bool>();
}

void FieldReader::only(std::initializer_list<const char*> known) const {
  if (!j_) return;
  for (const auto& [k, v] : j_->items()) {
    bool ok = false;
    for (const char* n : known) ok |= k == n;
    if (!ok) return fail(fmt::format("unknown field '{}'", k));
  }
}

}  // namespace gm
