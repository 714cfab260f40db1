// The shared data folder and the texts gamma reads from it, one rule each: where the folder is,
// the default calibration text, and the validation texts (which choose among plans and so are
// never calibration).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

// The shared data folder (text/, tasks/, models/): $GAMMA_SHARED_DATA, else the folder the
// build was configured with (CMake's GAMMA_SHARED_DATA, ../shared/data beside the source tree),
// else ../shared/data from the working directory.
std::string shared_data_dir();

// python-calib.txt from this byte on is validation text: held back from every calibration.
constexpr size_t kPythonValidFrom = 480000;

// The default calibration text: prose and code, about half each, the first bytes of
// war-and-peace.txt and python-calib.txt, prose first. Measured on Qwen2.5-Coder
// (results/calib_qwen/): the imatrix on both beat prose alone and code alone on the two
// validation texts together.
struct TextPart {
  std::string path;
  size_t bytes = 0;  // the first `bytes` of the file
};
std::vector<TextPart> default_calibration_parts();
// The parts read and joined (a newline between them where the first lacks one).
Result<std::string> default_calibration_text();
// A file holding default_calibration_text(), written once under cache_dir()/calib (for the
// programs that take calibration files: gamma learn, gamma hawq).
Result<std::string> default_calibration_file();

// A validation text by name: "wiki" (text/wiki.valid.tokens) or "python" (python-calib.txt
// from kPythonValidFrom on, made as `work_dir`/python-valid.txt); anything else is a path.
std::string validation_text_path(const std::string& name, const std::string& work_dir);
// A test (report) text by name: "wiki" (text/wiki.test.raw) or "python" (text/python-eval.txt),
// the two the protocol reports on; anything else is a path.
std::string test_text_path(const std::string& name);
// The file the text is read from before it is made (python-calib.txt for "python").
std::string validation_text_source(const std::string& name);
// Writes the named text that validation_text_path() puts in `work_dir` (a no-op for the others).
Status make_validation_text(const std::string& name, const std::string& work_dir);

}  // namespace gm
