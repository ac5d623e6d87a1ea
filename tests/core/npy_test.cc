#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(NpyTest, RoundTripsEveryRank) {
  for (Shape s : {Shape{}, Shape{3}, Shape{2, 3}, Shape{1, 2, 0}}) {
    Tensor t = Tensor::Empty(DataType::kFloat, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f;
    std::string p = TempPath("kiln_npy_test.npy");
    ASSERT_TRUE(WriteNpyFile(t, p).ok());
    auto r = ReadNpyFile(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->shape(), s);
    for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(r->data<float>()[i], t.data<float>()[i]);
  }
}

TEST(NpyTest, ReadsNumpyWrittenFile) {
  // Bytes numpy 1.24 writes for np.array([[1, 2]], dtype=np.int64).
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2), }";
  header.append(118 - header.size() - 1, ' ');
  header += '\n';
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  int64_t v[2] = {1, 2};
  b.append(reinterpret_cast<const char*>(v), 16);
  auto t = ParseNpy(b);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dtype(), DataType::kInt64);
  EXPECT_EQ(t->shape(), (Shape{1, 2}));
  EXPECT_EQ(t->data<int64_t>()[1], 2);
}

// What np.save writes for np.arange(6, dtype=np.int32).reshape(2, 3).T (column-major bytes
// 0 1 2 3 4 5 of the [3, 2] array [[0, 3], [1, 4], [2, 5]]) is read into row-major order.
TEST(NpyTest, ReadsFortranOrder) {
  std::string header = "{'descr': '<i4', 'fortran_order': True, 'shape': (3, 2), }\n";
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  int32_t v[6] = {0, 1, 2, 3, 4, 5};
  b.append(reinterpret_cast<const char*>(v), sizeof(v));
  auto t = ParseNpy(b);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->shape(), (Shape{3, 2}));
  const int32_t want[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data<int32_t>()[i], want[i]) << i;
}

TEST(NpyTest, RejectsMalformedInput) {
  EXPECT_EQ(ParseNpy("garbage").status().code(), StatusCode::kInvalidArgument);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n";
  std::string b = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  b.append(8, '\0');  // 2 floats where 4 are declared
  auto t = ParseNpy(b);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("needs 16"), std::string::npos) << t.status().message();
  EXPECT_EQ(ReadNpyFile("/nonexistent/x.npy").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
