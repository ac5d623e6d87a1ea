// `kiln run MODEL --images DIR|LIST ... --out FILE`: the offline batch job over image files.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kiln/options.h"
#include "kiln/status.h"

namespace kiln::cli {

struct ImageJobArgs {
  std::string images;  // directory or list file; non-empty selects the image job
  std::string recipe;
  std::string labels;
  std::string out;
  std::string shard;
  int shards = 0;
  int batch = 32;
  int workers = 0;  // 0 = one per CPU the process may use
  int top_k = 5;
  int threads = 0;
  bool resume = false;
};

// Adds the image-job options to `run`; returns the --images option.
CLI::Option* AddImageJobOptions(CLI::App* cmd, ImageJobArgs* args);
Status RunImageJob(const std::string& model, SessionOptions options, const ImageJobArgs& args);

}  // namespace kiln::cli
