// metric_embed (embed.h): a trained metric_train model applied to a folder.
#include "experiments/metric/embed.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/common/flags.h"
#include "experiments/common/json.h"
#include "experiments/common/retrieval.h"
#include "experiments/metric/folder_study.h"
#include "data/dataset.h"
#include "nn/checkpoint.h"
#include "runtime/error.h"

namespace mn::exp {
namespace fs = std::filesystem;
namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::string json_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return v.dump();
}

// metric_train's flags with the checkpoint's model and input settings: the trunk is
// rebuilt from them exactly as the run built it.
Flags model_flags(const std::string& ckpt) {
  MN_CHECK(fs::is_regular_file(ckpt), "--checkpoint '", ckpt, "': ", fs::exists(ckpt) ? "not a file" : "no such file",
           " (give a metric_train run's best.safetensors or last.safetensors)");
  const nn::Metadata md = nn::read_safetensors_metadata(ckpt);
  auto study_it = md.find("study");
  MN_CHECK(study_it != md.end() && study_it->second == "metric_train", "--checkpoint '", ckpt, "' was written by ",
           study_it == md.end() ? std::string("no MetricNet study") : study_it->second,
           ", not metric_train: metric_embed reads metric_train's checkpoints");
  const auto cfg_it = md.find("config");
  const Json cfg = cfg_it == md.end() ? Json() : Json::parse(cfg_it->second, nullptr, false);
  MN_CHECK(cfg.is_object(), "--checkpoint '", ckpt, "': its metadata has no 'config' of flags");
  auto study = make_metric_folder_study();
  Flags f("metric_train", "");
  study->declare_flags(f);
  for (const char* k : {"trunk", "channels", "image-size", "embedding", "width", "hidden", "invert", "loss",
                        "distance"}) {
    auto it = cfg.find(k);
    MN_CHECK(it != cfg.end(), "--checkpoint '", ckpt, "': its configuration lacks '", k, "'");
    f.set(k, json_text(*it), Flags::Origin::Checkpoint, "'" + ckpt + "' config." + k);
  }
  return f;
}

void write_npy(const std::string& path, const Tensor& e) {
  std::ostringstream h;
  h << "{'descr': '<f4', 'fortran_order': False, 'shape': (" << e.size(0) << ", " << e.size(1) << "), }";
  std::string header = h.str();
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream o(path, std::ios::binary);
  const char magic[] = "\x93NUMPY\x01\x00";
  o.write(magic, 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  o.write(reinterpret_cast<const char*>(&len), 2);
  o << header;
  o.write(reinterpret_cast<const char*>(e.data<float>()), static_cast<std::streamsize>(e.numel() * 4));
  MN_CHECK(o.good(), "--out '", path, "': cannot write it (disk full, or no permission?)");
}

void write_embeddings(const std::string& out, const Tensor& emb, const data::FolderDataset& ds) {
  const Tensor e = emb.to(DType::F32).contiguous();
  Json files = Json::array(), labels = Json::array();
  for (int64_t i = 0; i < ds.size(); ++i) {
    files.push_back(ds.files[size_t(i)]);
    labels.push_back(ds.labelled() ? Json(ds.class_names[size_t(ds.labels[size_t(i)])]) : Json());
  }
  if (ends_with(out, ".npy")) {
    write_npy(out, e);
    std::ofstream names(out + ".files.txt");  // numpy has no place for strings beside the array
    for (int64_t i = 0; i < ds.size(); ++i)
      names << ds.files[size_t(i)] << (ds.labelled() ? "\t" + ds.class_names[size_t(ds.labels[size_t(i)])] : "")
            << "\n";
    MN_CHECK(names.good(), "--out '", out, ".files.txt': cannot write it");
    return;
  }
  MN_CHECK(ends_with(out, ".safetensors"), "--out '", out, "': name it *.safetensors or *.npy");
  nn::write_safetensors(out, {{"embeddings", e}}, {{"files", files.dump()}, {"classes", labels.dump()},
                                                   {"root", ds.root}});
}

void write_neighbours(const std::string& path, const Neighbours& nb, const data::FolderDataset& q,
                      const data::FolderDataset& g) {
  std::ofstream o(path);
  auto cls = [](const data::FolderDataset& ds, int64_t i) {
    return ds.labelled() ? ds.class_names[size_t(ds.labels[size_t(i)])] : std::string();
  };
  if (ends_with(path, ".json")) {
    Json all = Json::array();
    for (size_t i = 0; i < nb.index.size(); ++i) {
      Json row{{"query", q.files[i]}, {"neighbours", Json::array()}};
      for (size_t r = 0; r < nb.index[i].size(); ++r)
        row["neighbours"].push_back({{"file", g.files[size_t(nb.index[i][r])]}, {"distance", nb.distance[i][r]}});
      all.push_back(row);
    }
    o << all.dump(1) << "\n";
  } else {
    MN_CHECK(ends_with(path, ".csv"), "--neighbours '", path, "': name it *.csv or *.json");
    o << "query,query_class,rank,neighbour,neighbour_class,distance\n";
    for (size_t i = 0; i < nb.index.size(); ++i)
      for (size_t r = 0; r < nb.index[i].size(); ++r) {
        const int64_t j = nb.index[i][r];
        char d[32];
        std::snprintf(d, sizeof d, "%.6g", nb.distance[i][r]);
        o << q.files[i] << "," << cls(q, int64_t(i)) << "," << r + 1 << "," << g.files[size_t(j)] << "," << cls(g, j)
          << "," << d << "\n";
      }
  }
  MN_CHECK(o.good(), "--neighbours '", path, "': cannot write it");
}

}  // namespace

int run_metric_embed(int argc, char** argv) {
  Flags f("metric_embed", "Embeds a folder of images with a metric_train model; lists each image's nearest "
          "neighbours; scores Recall@K and MAP@R when the folder has class folders.");
  f.add_string("checkpoint", "", "a metric_train run's best.safetensors (or last.safetensors)");
  f.add_string("images", "", "the folder to embed: class folders (ROOT/<class>/<image>) or images directly in it");
  f.add_string("out", "embeddings.safetensors", "where the embeddings go: *.safetensors (tensor 'embeddings', the "
               "file names and classes in its metadata) or *.npy (names in <out>.files.txt)");
  f.add_int("knn", 0, "list each image's K nearest neighbours (0: none)", 0, 100000);
  f.add_string("gallery", "", "--knn: search this folder (default: --images itself, each image leaving itself out)");
  f.add_string("neighbours", "neighbours.csv", "--knn: the list, *.csv or *.json");
  f.add_string("recall-k", "1,2,4,8", "labelled folders: the K of Recall@K");
  f.add_string("device", "cpu", "cpu, cuda or cuda:N");
  f.add_int("eval-batch", 256, "images embedded at a time", 1, 1000000);
  f.add_string("cache-dir", "", "the decoded images' cache (empty: the default cache folder; 'none': no cache)");
  try {
    if (!f.parse(argc, argv)) return 0;
    f.validate_ranges();
    MN_CHECK(!f.str("checkpoint").empty(), "give --checkpoint (a metric_train run's best.safetensors)");
    MN_CHECK(!f.str("images").empty(), "give --images (the folder to embed)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metric_embed: %s\n", user_message(e).c_str());
    return 2;
  }
  try {
    std::vector<int> ks;
    std::stringstream ss(f.str("recall-k"));
    for (std::string t; std::getline(ss, t, ',');) {
      char* end = nullptr;
      const long k = std::strtol(t.c_str(), &end, 10);
      MN_CHECK(!t.empty() && *end == '\0' && k >= 1 && k <= 100000, "--recall-k ", f.str("recall-k"),
               ": give positive whole numbers separated by commas, e.g. 1,2,4,8");
      ks.push_back(static_cast<int>(k));
    }
    const Flags mf = model_flags(f.str("checkpoint"));
    const Device device = parse_device(f.str("device"));
    Generator g(0);
    std::shared_ptr<nn::Module> trunk = make_folder_trunk(mf, g, device);
    nn::load_checkpoint(f.str("checkpoint"), *trunk);
    data::FolderLoadOptions o;
    o.channels = static_cast<int>(mf.i64("channels"));
    o.image_size = static_cast<int>(mf.i64("image-size"));
    o.allow_unlabelled = true;
    o.cache_dir = f.str("cache-dir") == "none" ? "" : f.str("cache-dir").empty() ? data::default_cache_dir()
                                                                                 : f.str("cache-dir");
    const bool invert = mf.flag("invert"), cosine = folder_uses_cosine(mf);
    const data::FolderDataset ds = data::load_image_folder(f.str("images"), o);
    const Tensor emb = embed_images(*trunk, ds.images, invert, device, f.i64("eval-batch"));
    write_embeddings(f.str("out"), emb, ds);
    std::printf("metric_embed: %lld images of '%s' -> %s (%lld x %lld, %s distance)\n",
                static_cast<long long>(ds.size()), f.str("images").c_str(), f.str("out").c_str(),
                static_cast<long long>(emb.size(0)), static_cast<long long>(emb.size(1)),
                cosine ? "cosine" : "Euclidean");
    if (f.i64("knn") > 0) {
      const bool self = f.str("gallery").empty();
      const data::FolderDataset gal = self ? data::FolderDataset{} : data::load_image_folder(f.str("gallery"), o);
      const Tensor gemb = self ? emb : embed_images(*trunk, gal.images, invert, device, f.i64("eval-batch"));
      const Neighbours nb = nearest_neighbours(emb, gemb, static_cast<int>(f.i64("knn")), cosine, self);
      write_neighbours(f.str("neighbours"), nb, ds, self ? ds : gal);
      std::printf("metric_embed: the %lld nearest of each image in %s\n", static_cast<long long>(f.i64("knn")),
                  f.str("neighbours").c_str());
    }
    if (ds.labelled()) {
      const RetrievalMetrics m = retrieval_metrics(emb, ds.labels, ks, cosine);
      for (const auto& [k, v] : m.recall_at) std::printf("Recall@%d %.2f %%\n", k, v);
      std::printf("MAP@R %.2f %%, R-precision %.2f %% (%lld queries; %lld of one-image classes left out)\n",
                  m.map_at_r, m.r_precision, static_cast<long long>(m.queries), static_cast<long long>(m.skipped));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metric_embed: %s\n", user_message(e).c_str());
    return 1;
  }
}

}  // namespace mn::exp
