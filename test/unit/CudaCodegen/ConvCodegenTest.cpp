//===- ConvCodegenTest.cpp - conv2d's kernel choices ----------------------===//
//
// conv2d lowered to a multi-template buffer (lib/OpUnits/Conv2d.cpp): the
// choices each shape is offered, every kernel choice (the CUDA-core and
// tensor-core implicit GEMMs, the direct kernel) of dense, grouped,
// depthwise and 64-bit-indexed shapes generated and compiled with NVRTC
// for sm_90 wherever libnvrtc can be opened (skips and says why
// elsewhere), malformed tile names refused, and extern.cudnn refused with
// the reason where cuDNN cannot be loaded.
//
//===----------------------------------------------------------------------===//
#include "CompileAll.h"
#include "IRTestUtils.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaCompiler.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Lowering/Lowering.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "gtest/gtest.h"
#include <cstdlib>
#include <mutex>

using namespace mtsched;

namespace {

struct Parsed {
  llvm::SourceMgr SM;
  std::unique_ptr<Module> M;
};

/// One conv2d graph (its text after the signature), lowered.
std::unique_ptr<Parsed> lowered(const std::string &Src,
                                const LoweringOptions &Opts = {}) {
  auto P = std::make_unique<Parsed>();
  P->M = test::parseAndVerify(P->SM, Src, "c.mir");
  if (!P->M)
    return nullptr;
  if (llvm::Error E = createLowerPass(Opts)->run(*P->M->getGraphs()[0])) {
    llvm::consumeError(std::move(E));
    return nullptr;
  }
  return P;
}

const MultiTemplateBufferNode &node(const Parsed &P) {
  return *llvm::cast<MultiTemplateBufferNode>(
      P.M->getGraphs()[0]->getNodes()[0].get());
}

std::vector<std::string> names(const MultiTemplateBufferNode &N) {
  std::vector<std::string> Out;
  for (const Choice &C : N.getChoices())
    Out.push_back(C.Name);
  return Out;
}

// Dense (ResNet 3x3, bf16), grouped (f16, partial tiles), depthwise (f32),
// a ViT patch embedding (every tile) and an input of 2^32 elements (64-bit
// indices).
const char *const Shapes[] = {
    "graph @resnet(%x: bf16[8,64,56,56], %w: bf16[64,64,3,3], %b: bf16[64]) "
    "{\n  %r = conv2d(%x, %w, %b) {padding = 1} : bf16[8,64,56,56]\n  return "
    "%r\n}\n",
    "graph @grouped(%x: f16[2,48,13,11], %w: f16[64,24,3,3]) {\n  %y = "
    "conv2d(%x, %w) {padding = [2, 1], dilation = [2, 1], groups = 2} : "
    "f16[2,64,13,11]\n  return %y\n}\n",
    "graph @depthwise(%x: f32[2,96,14,14], %w: f32[96,1,7,7], %b: f32[96]) "
    "{\n  %y = conv2d(%x, %w, %b) {padding = 3, groups = 96} : "
    "f32[2,96,14,14]\n  return %y\n}\n",
    "graph @patch(%x: bf16[2,3,224,224], %w: bf16[768,3,16,16]) {\n  %y = "
    "conv2d(%x, %w) {stride = 16} : bf16[2,768,14,14]\n  return %y\n}\n",
    "graph @huge(%x: bf16[64,64,1024,1024], %w: bf16[64,64,3,3]) {\n  %y = "
    "conv2d(%x, %w) {padding = 1} : bf16[64,64,1024,1024]\n  return %y\n}\n",
};

} // namespace

TEST(ConvCodegen, ChoicesFitTheShape) {
  auto Dense = lowered(Shapes[0]);
  ASSERT_TRUE(Dense);
  EXPECT_EQ(names(node(*Dense)),
            (std::vector<std::string>{
                "conv_igemm_128x16x16_t4x2", "conv_igemm_128x32x16_t4x4",
                "conv_igemm_64x32x16_t4x2", "conv_igemm_64x64x16_t4x4",
                "conv_igemm_128x64x8_t8x4", "conv_mma_128x64x32_w4",
                "conv_mma_64x32x32_w4", "extern.cudnn"}));
  // f32 has no tensor-core tile; two groups of 32 channels not the wide one.
  auto Grouped = lowered(Shapes[1]);
  ASSERT_TRUE(Grouped);
  EXPECT_EQ(names(node(*Grouped)),
            (std::vector<std::string>{"conv_igemm_128x16x16_t4x2",
                                      "conv_igemm_128x32x16_t4x4",
                                      "conv_igemm_64x32x16_t4x2",
                                      "conv_mma_64x32x32_w4", "extern.cudnn"}));
  auto Depthwise = lowered(Shapes[2]);
  ASSERT_TRUE(Depthwise);
  EXPECT_EQ(names(node(*Depthwise)),
            (std::vector<std::string>{
                "conv_direct", "conv_igemm_128x16x16_t4x2", "extern.cudnn"}));
  // --disable-choices removes them, like any other choice.
  LoweringOptions Opts;
  Opts.Choices.Disabled.insert("extern.cudnn");
  Opts.Choices.Disabled.insert("conv_direct");
  auto Less = lowered(Shapes[2], Opts);
  ASSERT_TRUE(Less);
  EXPECT_EQ(names(node(*Less)),
            (std::vector<std::string>{"conv_igemm_128x16x16_t4x2"}));
  // The names are known to the --disable-choices check.
  EXPECT_TRUE(opUnitOffersChoice("conv_igemm_128x128x8_t8x8"));
  EXPECT_TRUE(opUnitOffersChoice("extern.cudnn"));
  EXPECT_FALSE(opUnitOffersChoice("conv_igemm_1x1x1_t1x1"));
  // Every choice has the simulator's terms; a foreign name has none.
  const OpUnitInfo *Info = lookupOpUnitInfo(OpCode::Conv2d);
  ASSERT_TRUE(Info && Info->ChoiceCost);
  for (const Choice &C : node(*Dense).getChoices()) {
    std::optional<OpUnitChoiceCost> Cost =
        Info->ChoiceCost(node(*Dense), C.Name);
    ASSERT_TRUE(Cost) << C.Name;
    EXPECT_GT(Cost->Flops, 0) << C.Name;
    EXPECT_GT(Cost->Efficiency, 0) << C.Name;
  }
  EXPECT_FALSE(Info->ChoiceCost(node(*Dense), "conv_direct"));
  EXPECT_FALSE(Info->ChoiceCost(node(*Dense), "gemm_128x64x32_w4_s3"));
}

TEST(ConvCodegen, TensorCoreTilesNeedSixteenBits) {
  auto P = lowered(Shapes[2]);
  ASSERT_TRUE(P);
  llvm::Expected<KernelSource> K =
      generateOpUnitChoiceKernel("k", node(*P), "conv_mma_64x32x32_w4");
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("need bf16 or f16, not f32"),
            std::string::npos);
}

TEST(ConvCodegen, MalformedTilesAreRefused) {
  auto P = lowered(Shapes[0]);
  ASSERT_TRUE(P);
  // Not the canonical spelling, a thread tile that does not divide the
  // block, too many threads, too much shared memory, a direct kernel for a
  // dense convolution, a library.
  for (const char *Bad :
       {"conv_igemm_064x64x16_t4x4", "conv_igemm_64x64x16_t3x4",
        "conv_igemm_256x256x8_t2x2", "conv_igemm_128x128x64_t8x8",
        "conv_igemm_64x64x16", "conv_direct", "extern.cudnn",
        "conv_mma_128x64x32_w3", "conv_mma_128x64x24_w4",
        "conv_mma_128x64x32"}) {
    llvm::Expected<KernelSource> K =
        generateOpUnitChoiceKernel("k", node(*P), Bad);
    ASSERT_FALSE(bool(K)) << Bad;
    EXPECT_NE(llvm::toString(K.takeError()).find("no kernel for choice"),
              std::string::npos)
        << Bad;
  }
}

/// Where cuDNN cannot be loaded, extern.cudnn says why. cuDNN is loaded
/// once per process: the check runs in a fresh one (a death test re-runs
/// the binary), with cuDNN turned off.
TEST(ConvCodegen, CudnnAbsentSaysWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("MTSCHED_CUDNN_LIB", "off", 1);
        auto P = lowered(Shapes[0]);
        if (!P)
          std::exit(2);
        llvm::Expected<OpUnitExternCall> Call =
            prepareOpUnitExtern(node(*P), "extern.cudnn");
        if (Call)
          std::exit(3);
        llvm::errs() << llvm::toString(Call.takeError()) << "\n";
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "cuDNN cannot be loaded \\(turned off by MTSCHED_CUDNN_LIB=off\\)");
}

/// Where cuDNN loads (it needs no GPU for this), it accepts the
/// descriptors of each shape: the tensors, the filter, the padding,
/// stride, dilation, groups and math type. Its legacy descriptors refuse
/// an input of 2^32 elements: the choice then fails naming the call.
TEST(ConvCodegen, CudnnTakesTheDescriptors) {
  for (const char *Src : Shapes) {
    auto P = lowered(Src);
    ASSERT_TRUE(P) << Src;
    llvm::Expected<OpUnitExternCall> Call =
        prepareOpUnitExtern(node(*P), "extern.cudnn");
    if (Call) {
      EXPECT_TRUE(Call->Plan && Call->Run);
      continue;
    }
    std::string Why = llvm::toString(Call.takeError());
    if (Why.find("cannot be loaded") != std::string::npos)
      GTEST_SKIP() << Why;
    if (node(*P).getName() == "y" && llvm::StringRef(Src).contains("@huge"))
      EXPECT_NE(Why.find("cudnnSetTensor4dDescriptor (input) failed"),
                std::string::npos)
          << Why;
    else
      ADD_FAILURE() << Src << ": " << Why;
  }
}

TEST(ConvCodegen, EveryChoiceCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> Nv = cuda::loadNvrtc();
  if (!Nv)
    GTEST_SKIP() << "NVRTC not available, conv2d kernels not compiled: "
                 << llvm::toString(Nv.takeError());
  std::vector<std::unique_ptr<Parsed>> Keep;
  std::vector<KernelSource> Work;
  for (const char *Src : Shapes) {
    auto P = lowered(Src);
    ASSERT_TRUE(P) << Src;
    for (const Choice &C : node(*P).getChoices()) {
      if (C.isExtern())
        continue;
      llvm::Expected<KernelSource> K = generateOpUnitChoiceKernel(
          node(*P).getName() + "_" + C.Name, node(*P), C.Name);
      ASSERT_TRUE(bool(K)) << C.Name << ": " << llvm::toString(K.takeError());
      Work.push_back(std::move(*K));
    }
    Keep.push_back(std::move(P));
  }
  EXPECT_GE(Work.size(), 20u);
  expectEveryKernelCompiles(Work, 8);
}
