// The build's provenance, baked in at build time (cmake/build_info.cmake): the
// commit the binary was built from, whether the tree's tracked files differed
// from it, the build type, the compiler and whether CUDA kernels are in.
#pragma once

namespace mn::exp {

struct BuildInfo {
  const char* commit;  // full hash, or "unknown" outside a git checkout
  bool dirty;          // tracked files differed from the commit when built
  const char* build_type;
  const char* compiler;
  bool cuda;
};
const BuildInfo& build_info();

}  // namespace mn::exp
