// metric_embed: embeddings and nearest neighbours of a folder of images with a
// metric_train model. `--help` lists the flags.
#include "experiments/metric/embed.h"

int main(int argc, char** argv) { return mn::exp::run_metric_embed(argc, argv); }
