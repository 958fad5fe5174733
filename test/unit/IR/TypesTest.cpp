//===- TypesTest.cpp ------------------------------------------------------===//
#include "mtsched/IR/Types.h"
#include "gtest/gtest.h"

using namespace mtsched;

TEST(TypesTest, DTypeNamesRoundTrip) {
  for (DType T : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64,
                  DType::F8E4M3, DType::F8E5M2})
    EXPECT_EQ(parseDType(dtypeName(T)), T) << dtypeName(T).str();
  EXPECT_FALSE(parseDType("f64").has_value());
  EXPECT_FALSE(parseDType("F32").has_value());
  EXPECT_FALSE(parseDType("").has_value());
}

TEST(TypesTest, DTypeSizesAndFloatness) {
  EXPECT_EQ(dtypeBytes(DType::F32), 4u);
  EXPECT_EQ(dtypeBytes(DType::F16), 2u);
  EXPECT_EQ(dtypeBytes(DType::BF16), 2u);
  EXPECT_EQ(dtypeBytes(DType::I32), 4u);
  EXPECT_EQ(dtypeBytes(DType::I64), 8u);
  EXPECT_TRUE(isFloatDType(DType::BF16));
  EXPECT_TRUE(isFloatDType(DType::F16));
  EXPECT_TRUE(isFloatDType(DType::F32));
  EXPECT_FALSE(isFloatDType(DType::I32));
  EXPECT_FALSE(isFloatDType(DType::I64));
  for (DType T : {DType::F8E4M3, DType::F8E5M2}) {
    EXPECT_EQ(dtypeBytes(T), 1u);
    EXPECT_TRUE(isFloatDType(T));
    EXPECT_TRUE(isFp8DType(T));
  }
  EXPECT_FALSE(isFp8DType(DType::BF16));
}

TEST(TypesTest, TensorTypeSizes) {
  TensorType T(DType::BF16, {1024, 4096});
  EXPECT_EQ(T.rank(), 2u);
  EXPECT_EQ(T.numElements(), 1024 * 4096);
  EXPECT_EQ(T.numBytes(), 2 * 1024 * 4096);
  EXPECT_EQ(T.innerDim(), 4096);

  // A scalar has one element and an inner dimension of 1.
  TensorType Scalar(DType::F32, {});
  EXPECT_EQ(Scalar.rank(), 0u);
  EXPECT_EQ(Scalar.numElements(), 1);
  EXPECT_EQ(Scalar.numBytes(), 4);
  EXPECT_EQ(Scalar.innerDim(), 1);
}

TEST(TypesTest, EqualityNeedsDTypeAndShape) {
  TensorType A(DType::F32, {4, 8});
  EXPECT_EQ(A, TensorType(DType::F32, {4, 8}));
  EXPECT_NE(A, TensorType(DType::F16, {4, 8}));
  EXPECT_NE(A, TensorType(DType::F32, {8, 4}));
  EXPECT_NE(A, TensorType(DType::F32, {4, 8, 1}));
}

TEST(TypesTest, Printing) {
  EXPECT_EQ(TensorType(DType::BF16, {1024, 4096}).str(), "bf16[1024,4096]");
  EXPECT_EQ(TensorType(DType::I64, {}).str(), "i64[]");
  EXPECT_EQ(shapeStr({}), "[]");
  EXPECT_EQ(shapeStr({7}), "[7]");
  EXPECT_EQ(shapeStr({2, 3, 4}), "[2,3,4]");
}
