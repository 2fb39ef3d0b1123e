// The deterministic mutations the replay tests feed their decoders: flipped
// bits, cut and repeated runs, truncation, and inserted tokens that steer the
// text towards the decoder's syntax (brackets, quotes, numbers past int's
// range, known keys). Seeded, so every build replays the same inputs.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace nvdra::fuzz {

inline std::string Mutate(std::string s, std::mt19937& rng, const std::vector<std::string>& tokens) {
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < edits && !s.empty(); ++k) {
    size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8))); break;
      case 1: s.erase(at, 1 + rng() % 16); break;
      case 2: s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 32)); break;
      case 3: s.resize(at); break;
      case 4: s.insert(at, tokens[rng() % tokens.size()]); break;
    }
  }
  return s;
}

}  // namespace nvdra::fuzz
