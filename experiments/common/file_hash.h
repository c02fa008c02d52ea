// Content hashes of run outputs: summary.json names the best checkpoint by its
// xxHash (XXH3, 64 bits) so the final evaluation can prove it loaded that file.
#pragma once
#include <string>

namespace mn::exp {

// XXH3-64 of the file's bytes as 16 lowercase hex digits; throws naming the file
// when it cannot be read.
std::string file_xxh3(const std::string& path);

}  // namespace mn::exp
