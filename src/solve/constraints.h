// Stage II constraints on the choice per module: --allow PATTERN=ID[,ID...] restricts the
// modules whose name matches PATTERN (ECMAScript regex, searched in the name, so "ffn_down"
// or "blk\.0\." work) to those candidates; --pin PATTERN=ID fixes them to one. An ID
// matches a candidate id ("Q6_K@unsloth") or a ggml type ("Q6_K": every candidate of it).
#pragma once
#include <regex>
#include <string>
#include <vector>

#include "pool/manifest.h"
#include "util/status.h"

namespace gm::solve {

struct Constraint {
  enum class Kind { kAllow, kPin } kind;
  std::string spec;  // as given, for messages and the plan's info
  std::regex pattern;
  std::vector<std::string> ids;
};

// Parses "PATTERN=ID[,ID...]" (the last '=' splits); a pin takes exactly one ID.
Result<Constraint> parse_constraint(Constraint::Kind kind, const std::string& spec);

// For each module of `m`, the indices of the candidates every constraint permits (all when
// none applies). Fails when a pattern matches no module, an ID names no candidate of a
// module it applies to, a pinned ID is ambiguous, or a module is left with no candidate.
Result<std::vector<std::vector<int>>> allowed_candidates(const Manifest& m, const std::vector<Constraint>& cs);

}  // namespace gm::solve
