// xxHash of files (see file_hash.h). Debian libxxhash-dev; XXH_INLINE_ALL
// compiles the hash into this file, so no library needs linking.
#include "experiments/common/file_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/error.h"

namespace mn::exp {

std::string file_xxh3(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) MN_THROW("cannot read '", path, "' to hash it: ", std::strerror(errno));
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> st(XXH3_createState(), XXH3_freeState);
  MN_CHECK(st && XXH3_64bits_reset(st.get()) == XXH_OK, "hashing '", path, "': out of memory");
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) XXH3_64bits_update(st.get(), buf.data(), n);
  if (std::ferror(f.get())) MN_THROW("reading '", path, "' to hash it failed: ", std::strerror(errno));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(st.get())));
  return hex;
}

}  // namespace mn::exp
