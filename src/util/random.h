// Counter-based randomness: a draw is a pure function of its inputs (a seed, a step, a name,
// an index), so a resumed or re-threaded run draws exactly what an uninterrupted one would.
#pragma once
#include <cstdint>
#include <string>

namespace gm {

// SplitMix64's finalizer: a well-mixed 64-bit value of x.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a string: a stream id from a name, the same on every platform (std::hash is not).
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A uniform double in [0, 1) from 53 bits of x.
inline double unit_double(uint64_t x) { return double(x >> 11) * 0x1.0p-53; }

}  // namespace gm
