// The pair_selection binary's flags and their mapping onto the study's
// configuration, apart from the driver so that a test can check that every
// flag reaches the field it names (tests/experiments/test_pair_selection.cpp).
#pragma once
#include "experiments/common/flags.h"
#include "experiments/pair_selection/study.h"

namespace mn::pairsel {

// Declares every flag of pair_selection (defaults = the protocol's settled reading).
void declare_study_flags(exp::Flags& f);

// The study configuration the flags describe (cfg.mlp.input stays 784 and
// cfg.seed 1: the driver sets them from the data and --seed).
StudyConfig study_config(const exp::Flags& f);

}  // namespace mn::pairsel
