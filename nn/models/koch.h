// The Omniglot study's models in one include: Koch et al.'s branch (the trunk,
// nn/models/koch_branch.h) and the siamese and triplet nets built on it
// (nn/models/siamese.h, nn/models/triplet.h, which take any trunk). Existing
// code that includes this header keeps compiling unchanged.
#pragma once
#include "nn/models/koch_branch.h"
#include "nn/models/siamese.h"
#include "nn/models/triplet.h"
