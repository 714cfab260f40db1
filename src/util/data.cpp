#include "util/data.h"

#include <cstdlib>
#include <filesystem>

#include "util/files.h"

namespace fs = std::filesystem;

namespace gm {

std::string shared_data_dir() {
  if (const char* e = std::getenv("GAMMA_SHARED_DATA"); e && *e) return e;
  std::error_code ec;
#ifdef GAMMA_DEFAULT_SHARED_DATA
  if (fs::is_directory(std::string(GAMMA_DEFAULT_SHARED_DATA) + "/text", ec))
    return fs::weakly_canonical(GAMMA_DEFAULT_SHARED_DATA, ec).string();
#endif
  return fs::weakly_canonical("../shared/data", ec).string();
}

std::vector<TextPart> default_calibration_parts() {
  const std::string t = shared_data_dir() + "/text/";
  return {{t + "war-and-peace.txt", 40000}, {t + "python-calib.txt", 36000}};
}

Result<std::string> default_calibration_text() {
  std::string text;
  for (const auto& p : default_calibration_parts()) {
    GAMMA_ASSIGN_OR_RETURN(std::string t, read_text_file(p.path, "calibration text"));
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += t.substr(0, p.bytes);
  }
  return text;
}

Result<std::string> default_calibration_file() {
  const std::string path = cache_dir() + "/calib/default-calib.txt";
  GAMMA_ASSIGN_OR_RETURN(std::string text, default_calibration_text());
  if (auto old = read_text_file(path, "calibration text"); old.is_ok() && *old == text) return path;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Status::errorf("cannot create {}: {}", fs::path(path).parent_path().string(), ec.message());
  GAMMA_RETURN_IF_ERROR(write_file_atomic(path, text));
  return path;
}

std::string test_text_path(const std::string& name) {
  if (name == "wiki") return shared_data_dir() + "/text/wiki.test.raw";
  if (name == "python") return shared_data_dir() + "/text/python-eval.txt";
  return name;
}

std::string validation_text_path(const std::string& name, const std::string& work_dir) {
  if (name == "wiki") return shared_data_dir() + "/text/wiki.valid.tokens";
  if (name == "python") return work_dir + "/python-valid.txt";
  return name;
}

std::string validation_text_source(const std::string& name) {
  return name == "python" ? shared_data_dir() + "/text/python-calib.txt" : validation_text_path(name, "");
}

Status make_validation_text(const std::string& name, const std::string& work_dir) {
  if (name != "python") return Status::ok();
  const std::string path = validation_text_path(name, work_dir);
  GAMMA_ASSIGN_OR_RETURN(std::string t, read_text_file(validation_text_source(name), "validation text"));
  if (t.size() <= kPythonValidFrom)
    return Status::errorf("{} is shorter than {} bytes", validation_text_source(name), kPythonValidFrom);
  const std::string tail = t.substr(kPythonValidFrom);
  if (auto old = read_text_file(path, "validation text"); old.is_ok() && *old == tail) return Status::ok();
  return write_file_atomic(path, tail);
}

}  // namespace gm
