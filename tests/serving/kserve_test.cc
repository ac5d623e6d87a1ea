// The KServe v2 documents (src/serving/kserve.h) without a socket: infer requests with JSON data
// (flat and nested) and with the binary tensor data extension, every malformed case the parser
// refuses, and responses as JSON and binary; the config's dims with and without batching.
#include "serving/kserve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

namespace kiln::serving {
namespace {

using nlohmann::json;

std::string Binary(const std::string& header, const std::vector<float>& v) {
  std::string body = header;
  body.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return body;
}

TEST(KServeTest, DatatypesRoundTrip) {
  for (DataType t :
       {DataType::kBool, DataType::kUInt8, DataType::kInt8, DataType::kInt32, DataType::kInt64,
        DataType::kFloat16, DataType::kFloat, DataType::kDouble, DataType::kBFloat16})
    EXPECT_EQ(FromKServeDatatype(KServeDatatype(t)), t) << KServeDatatype(t);
  EXPECT_EQ(FromKServeDatatype("BYTES"), DataType::kUndefined);
  EXPECT_EQ(TritonConfigType(DataType::kFloat), "TYPE_FP32");
}

TEST(KServeTest, JsonDataFlatAndNested) {
  for (const char* data : {"[1,2,3,4,5,6]", "[[1,2,3],[4,5,6]]"}) {
    const std::string body =
        std::string(R"({"id":"r1","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":)") +
        data + "}]}";
    auto r = ParseHttpInferRequest(body, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id, "r1");
    ASSERT_EQ(r->inputs.size(), 1u);
    const Tensor& t = r->inputs[0].tensor;
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], static_cast<float>(i + 1));
  }
}

TEST(KServeTest, JsonDataOtherTypes) {
  auto r = ParseHttpInferRequest(
      R"({"inputs":[{"name":"b","shape":[3],"datatype":"BOOL","data":[true,false,true]},
                    {"name":"i","shape":[2],"datatype":"INT64","data":[-5,9000000000]},
                    {"name":"h","shape":[1],"datatype":"FP16","data":[1.5]}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->inputs[0].tensor.data<bool>()[0]);
  EXPECT_FALSE(r->inputs[0].tensor.data<bool>()[1]);
  EXPECT_EQ(r->inputs[1].tensor.data<int64_t>()[1], 9000000000LL);
  EXPECT_EQ(r->inputs[2].tensor.data<uint16_t>()[0], 0x3e00);  // 1.5 in IEEE half
}

TEST(KServeTest, BinaryInputsFollowTheJson) {
  const std::string header =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},
                    {"name":"b","shape":[1],"datatype":"FP32","data":[7]},
                    {"name":"c","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}],
          "outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}]})";
  auto r = ParseHttpInferRequest(Binary(header, {1.5f, 2.5f, 3.5f}), header.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->inputs.size(), 3u);
  EXPECT_EQ(r->inputs[0].tensor.data<float>()[1], 2.5f);
  EXPECT_EQ(r->inputs[1].tensor.data<float>()[0], 7.f);
  EXPECT_EQ(r->inputs[2].tensor.data<float>()[0], 3.5f);
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_TRUE(r->outputs[0].binary);
  EXPECT_FALSE(r->outputs[1].binary);
}

// With an owner, binary data on a 64-byte boundary is used where it lies (the tensor shares the
// owner, which outlives the parse); data off the boundary is copied.
TEST(KServeTest, AlignedBinaryInputsAreAdoptedNotCopied) {
  const std::string header =
      R"({"inputs":[{"name":"a","shape":[16],"datatype":"FP32","parameters":{"binary_data_size":64}},
                    {"name":"b","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}},
                    {"name":"c","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  std::vector<float> values(19);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  const std::string bytes = Binary(header, values);
  // The body placed so that its binary part starts on a 64-byte boundary, as the server does.
  const size_t pad = (64 - header.size() % 64) % 64;
  std::shared_ptr<char> buffer(static_cast<char*>(std::aligned_alloc(64, 1024)),
                               [](char* p) { std::free(p); });
  ASSERT_GE(1024u, pad + bytes.size());
  std::memcpy(buffer.get() + pad, bytes.data(), bytes.size());
  const std::string_view body(buffer.get() + pad, bytes.size());
  auto r = ParseHttpInferRequest(body, header.size(), buffer);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->inputs.size(), 3u);
  const char* binary = body.data() + header.size();
  EXPECT_EQ(r->inputs[0].tensor.raw(), binary);       // adopted: 64-byte aligned
  EXPECT_EQ(r->inputs[1].tensor.raw(), binary + 64);  // so does b, after a's 64 bytes
  EXPECT_NE(r->inputs[2].tensor.raw(), binary + 68);  // c is not: copied
  const long owners = buffer.use_count();
  EXPECT_GE(owners, 2);  // the adopted tensors hold the buffer
  std::weak_ptr<char> weak = buffer;
  buffer.reset();
  ASSERT_FALSE(weak.expired());  // still held by the tensors
  EXPECT_EQ(r->inputs[0].tensor.data<float>()[15], 15.5f);
  EXPECT_EQ(r->inputs[1].tensor.data<float>()[0], 16.5f);
  EXPECT_EQ(r->inputs[2].tensor.data<float>()[1], 18.5f);
  r->inputs.clear();
  EXPECT_TRUE(weak.expired());
  // Without an owner everything is copied.
  auto copied = ParseHttpInferRequest(std::string_view(bytes), header.size());
  ASSERT_TRUE(copied.ok());
  EXPECT_NE(copied->inputs[0].tensor.raw(), static_cast<const void*>(bytes.data() + header.size()));
  EXPECT_EQ(copied->inputs[0].tensor.data<float>()[3], 3.5f);
}

TEST(KServeTest, JsonNumbersOutOfTheTypesRangeAreRefusedNotUndefined) {
  // The request fuzzer found a float converted to int64 out of range (undefined behaviour).
  auto bad = [](const std::string& datatype, const std::string& value) {
    return ParseHttpInferRequest(R"({"inputs":[{"name":"x","shape":[1],"datatype":")" + datatype +
                                     R"(","data":[)" + value + "]}]}",
                                 std::nullopt);
  };
  for (auto [type, value] :
       std::vector<std::pair<std::string, std::string>>{{"INT8", "128"},
                                                        {"INT8", "-129"},
                                                        {"UINT8", "-1"},
                                                        {"INT8", "1e20"},
                                                        {"INT64", "2.2e21"},
                                                        {"UINT64", "-1.5e19"},
                                                        {"INT32", "18446744073709551615"}}) {
    auto r = bad(type, value);
    ASSERT_FALSE(r.ok()) << type << " " << value;
    EXPECT_NE(r.status().message().find("does not fit the tensor's type"), std::string::npos)
        << r.status().ToString();
  }
  auto r = bad("INT8", "-127.9");  // a fraction is truncated toward zero, as before
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->inputs[0].tensor.data<int8_t>()[0], -127);
  r = bad("FP32", "1e300");  // beyond float32: infinity, as numpy's astype gives
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::isinf(r->inputs[0].tensor.data<float>()[0]));
  r = bad("UINT64", "18446744073709551615");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->inputs[0].tensor.data<uint64_t>()[0], 18446744073709551615ULL);
  auto m =
      ParseModelMetadataInputs(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2.2e21]}]})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not an int64"), std::string::npos);
  m = ParseModelMetadataInputs(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1,3]}]})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)[0].dims, (std::vector<int64_t>{-1, 3}));
}

TEST(KServeTest, MalformedRequestsSayWhatIsWrong) {
  struct Case {
    std::string body;
    std::optional<size_t> json_length;
    const char* expect;  // a phrase of the message
  };
  const std::string bin_header =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  const std::string short_header =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]})";
  const std::vector<Case> cases = {
      {"{bad", std::nullopt, "not valid JSON"},
      {"[1,2]", std::nullopt, "must be a JSON object"},
      {R"({"inputs":3})", std::nullopt, "no \"inputs\" array"},
      {R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})", std::nullopt, "\"name\""},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","data":["a"]}]})", std::nullopt,
       "datatype BYTES is not supported"},
      {R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})", std::nullopt,
       "non-negative"},
      {R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3]}]})", std::nullopt,
       "holds 4 elements; data has 3"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["a"]}]})", std::nullopt,
       "must hold numbers"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})", std::nullopt,
       "neither \"data\" nor binary_data_size"},
      {R"({"inputs":[{"name":"x","shape":[100000,100000,100000],"datatype":"FP32","data":[]}]})",
       std::nullopt, "too large"},
      // A shape is only a claim: 4e11 bytes declared, a few sent; refused before allocating.
      {R"({"inputs":[{"name":"x","shape":[100000000000],"datatype":"FP32","data":[1]}]})",
       std::nullopt, "holds 100000000000 elements; data has 1"},
      {Binary(
           R"({"inputs":[{"name":"x","shape":[100000000000],"datatype":"FP32","parameters":{"binary_data_size":400000000000}}]})",
           {1.f}),
       std::optional<size_t>(113), "bytes before its binary data does"},
      {bin_header, std::nullopt, "no Inference-Header-Content-Length"},
      {Binary(bin_header, {1.f}), bin_header.size(), "ends 4 bytes before"},
      {Binary(bin_header, {1.f, 2.f, 3.f}), bin_header.size(), "4 bytes of binary data follow"},
      {bin_header, bin_header.size() + 10, "but the body has"},
      {Binary(short_header, {1.f}), short_header.size(), "binary_data_size is 4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto r = ParseHttpInferRequest(c.body, c.json_length);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(KServeTest, ResponseAsJsonAndAsBinary) {
  InferRequest req;
  req.id = "7";
  req.outputs = {{"y", true}, {"z", false}};
  std::vector<NamedTensor> outs = {{"z", Tensor::FromVector<int64_t>({3, 4}, {2})},
                                   {"y", Tensor::FromVector<float>({0.5f, -1.f}, {1, 2})}};
  auto r = BuildHttpInferResponse("m", "1", req, outs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->json_length.has_value());
  const json j = json::parse(r->body.substr(0, *r->json_length));
  EXPECT_EQ(j["id"], "7");
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(j["outputs"][0]["shape"], json::parse("[1,2]"));
  EXPECT_EQ(j["outputs"][1]["data"], json::parse("[3,4]"));
  EXPECT_EQ(j["outputs"][1]["datatype"], "INT64");
  ASSERT_EQ(r->body.size(), *r->json_length + 8);
  float y[2];
  std::memcpy(y, r->body.data() + *r->json_length, 8);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[1], -1.f);

  InferRequest all;  // no outputs named: every output, as JSON
  auto r2 = BuildHttpInferResponse("m", "1", all, outs);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->json_length.has_value());
  EXPECT_EQ(json::parse(r2->body)["outputs"].size(), 2u);

  InferRequest unknown;
  unknown.outputs = {{"nope", false}};
  auto r3 = BuildHttpInferResponse("m", "1", unknown, outs);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("'nope'"), std::string::npos);
}

TEST(KServeTest, ConfigDimsDropTheBatchDimensionOnlyWhenBatching) {
  ModelDescription m;
  m.name = "net";
  m.version = "1";
  m.inputs = {{"x", DataType::kFloat, {-1, 3, 8, 8}, {"N", "", "", ""}, true}};
  m.outputs = {{"y", DataType::kFloat, {-1, 10}, {"N", ""}, true}};
  m.max_batch_size = 16;
  m.policy.max_queue_delay_us = 250;
  json c = json::parse(ModelConfigJson(m));
  EXPECT_EQ(c["max_batch_size"], 16);
  EXPECT_EQ(c["input"][0]["dims"], json::parse("[3,8,8]"));
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["output"][0]["dims"], json::parse("[10]"));
  EXPECT_EQ(c["dynamic_batching"]["max_queue_delay_microseconds"], 250);
  m.max_batch_size = 0;
  c = json::parse(ModelConfigJson(m));
  EXPECT_EQ(c["input"][0]["dims"], json::parse("[-1,3,8,8]"));
  EXPECT_FALSE(c.contains("dynamic_batching"));
  const json meta = json::parse(ModelMetadataJson(m));
  EXPECT_EQ(meta["inputs"][0]["shape"], json::parse("[-1,3,8,8]"));
  EXPECT_EQ(meta["versions"], json::parse("[\"1\"]"));
}


TEST(KServeTest, LoadRequestBodies) {
  EXPECT_TRUE(CheckLoadRequestBody("").ok());
  EXPECT_TRUE(CheckLoadRequestBody("{}").ok());
  // What tritonclient sends.
  EXPECT_TRUE(CheckLoadRequestBody(R"({"parameters": {"unload_dependents": false}})").ok());
  for (const char* bad : {"[]", "null", "\"x\"", "{", R"({"parameters": 3})",
                          R"({"parameters": []})"}) {
    const Status s = CheckLoadRequestBody(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  for (const char* refused : {R"({"parameters": {"config": "{}"}})",
                              R"({"parameters": {"file:1/model.onnx": "AAAA"}})"}) {
    const Status s = CheckLoadRequestBody(refused);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << refused;
    EXPECT_NE(s.message().find("not supported"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace kiln::serving
