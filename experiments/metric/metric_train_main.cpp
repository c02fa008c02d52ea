// metric_train: train an embedding on your own images (a folder of class folders).
// `--help` lists every flag; README.md, "Your own images", shows a whole session.
#include "experiments/metric/folder_study.h"

int main(int argc, char** argv) { return mn::exp::run_study(mn::exp::make_metric_folder_study(), argc, argv); }
