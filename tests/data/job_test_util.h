// A temporary folder per test and the files the image-job tests write into it (8x8 gray PNGs
// through libpng). Shared by job_stages_test.cc and image_job_test.cc.
#pragma once

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln {

namespace fs = std::filesystem;

class JobTestDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_job_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& rel) const { return (dir_ / rel).string(); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(P(rel), std::ios::binary) << text;
  }
  // An 8x8 gray PNG of one value.
  void WritePng(const std::string& rel, int value) {
    fs::create_directories((dir_ / rel).parent_path());
    png_image img{};
    img.version = PNG_IMAGE_VERSION;
    img.width = 8;
    img.height = 8;
    img.format = PNG_FORMAT_GRAY;
    std::vector<uint8_t> px(64, static_cast<uint8_t>(value));
    ASSERT_TRUE(png_image_write_to_file(&img, P(rel).c_str(), 0, px.data(), 0, nullptr));
  }
  fs::path dir_;
};

}  // namespace kiln
