// metric_embed: a metric_train checkpoint and a folder of images -> the images'
// embeddings with their file names (*.safetensors or *.npy), with --knn K each image's
// K nearest gallery images and their distances (*.csv or *.json), and Recall@K and
// MAP@R when the folder has class folders. The trunk is rebuilt from the checkpoint's
// configuration (trunk, channels, image size, --invert), so images are prepared exactly
// as in training.
#pragma once

namespace mn::exp {
// Exit status: 0 done, 1 a failure (one line on stderr naming the file or flag), 2 usage.
int run_metric_embed(int argc, char** argv);
}  // namespace mn::exp
