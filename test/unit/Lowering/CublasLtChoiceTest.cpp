//===- CublasLtChoiceTest.cpp - cuBLASLt choice names and offers ----------===//
#include "mtsched/Lowering/CublasLtChoice.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
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

/// The extern choices gemmChoices offers, in order.
static std::vector<std::string> externsOf(const ChoiceConfig &C, int64_t M,
                                          int64_t N, int64_t K,
                                          DType T = DType::BF16) {
  std::vector<std::string> Out;
  for (const Choice &Ch : C.gemmChoices(M, N, K, T))
    if (Ch.isExtern())
      Out.push_back(Ch.Name);
  return Out;
}

TEST(CublasLtChoice, LongGemmsAreOfferedTheFirstAlgorithms) {
  ChoiceConfig C = ChoiceConfig::getDefault();
  // Megatron's fc1 at prefill: 4.9e12 flops.
  std::vector<std::string> Long = {"extern.cublas", "extern.cublaslt_a0",
                                   "extern.cublaslt_a1", "extern.cublaslt_a2",
                                   "extern.cublaslt_a3"};
  EXPECT_EQ(externsOf(C, 4096, 49152, 12288), Long);
  // Just under the bound (2^41 flops), and 4096^3: cuBLAS alone.
  EXPECT_EQ(externsOf(C, 1024, 1024, 1024 * 1024 - 1),
            std::vector<std::string>{"extern.cublas"});
  EXPECT_EQ(externsOf(C, 1024, 1024, 1024 * 1024), Long);
  EXPECT_EQ(externsOf(C, 4096, 4096, 4096),
            std::vector<std::string>{"extern.cublas"});
  // fp8 operands go to no library; a disabled name is not offered.
  EXPECT_TRUE(externsOf(C, 4096, 49152, 12288, DType::F8E4M3).empty());
  C.Disabled.insert("extern.cublaslt_a2");
  EXPECT_EQ(externsOf(C, 4096, 49152, 12288).size(), 4u);
}

TEST(CublasLtChoice, AChoicesFilesExternsAreEveryExtern) {
  llvm::SmallString<128> Path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("externs", "json", Path));
  {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    ASSERT_FALSE(EC);
    OS << R"({"gemm_externs": ["extern.cublaslt_a1"]})";
  }
  ChoiceConfig C = ChoiceConfig::getDefault();
  llvm::Error E = C.loadFile(Path);
  llvm::sys::fs::remove(Path);
  ASSERT_FALSE(bool(E)) << llvm::toString(std::move(E));
  EXPECT_EQ(externsOf(C, 4096, 49152, 12288),
            std::vector<std::string>{"extern.cublaslt_a1"});
  EXPECT_EQ(externsOf(C, 64, 64, 64),
            std::vector<std::string>{"extern.cublaslt_a1"});
}
