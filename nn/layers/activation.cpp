// Activation modules are header-only (nn/layers/activation.h); this file anchors
// them in mn_nn so the header is compiled at least once with the library flags.
#include "nn/layers/activation.h"
