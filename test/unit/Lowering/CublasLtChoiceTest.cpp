//===- CublasLtChoiceTest.cpp - cuBLASLt choice names ---------------------===//
#include "mtsched/Lowering/CublasLtChoice.h"
#include "mtsched/IR/Graph.h"
#include <gtest/gtest.h>

using namespace mtsched;

TEST(CublasLtChoice, NamesRoundTrip) {
  for (int I = 0; I < CublasLtListed; ++I) {
    std::string Name = cublasLtChoiceName(I);
    EXPECT_EQ(cublasLtAlgoOf(Name), I) << Name;
    EXPECT_TRUE(isCublasLtName(Name));
    // An extern choice: never fused, priced by the extern GEMM model.
    EXPECT_TRUE((Choice{Name, {}, {}}.isExtern()));
  }
  EXPECT_EQ(cublasLtChoiceName(3), "extern.cublaslt_a3");
}

TEST(CublasLtChoice, RejectsOtherNames) {
  for (const char *Name :
       {"extern.cublas", "extern.cublaslt", "extern.cublaslt_a",
        "extern.cublaslt_a8", "extern.cublaslt_a01", "extern.cublaslt_a-1",
        "extern.cublaslt_a+1", "extern.cublaslt_1", "extern.cublaslt_a1x",
        "cublaslt_a1", "gemm_64x64x32_w4_s2"})
    EXPECT_EQ(cublasLtAlgoOf(Name), std::nullopt) << Name;
  EXPECT_FALSE(isCublasLtName("extern.cublas"));
  EXPECT_TRUE(isCublasLtName("extern.cublaslt_a9"));
}
