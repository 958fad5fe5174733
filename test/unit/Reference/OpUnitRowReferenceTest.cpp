//===- OpUnitRowReferenceTest.cpp - Row references against the whole -----===//
//
// The CUDA benchmarker checks each kernel choice of an op unit (conv2d) on
// sampled rows through the op unit's row reference; a row reference that
// disagreed with the interpreter would pass wrong kernels or fail right
// ones (every conv2d choice failed its check on an H200 before conv2d had
// one). Each row of each conv here must equal the interpreter's.
//
//===----------------------------------------------------------------------===//
#include "mtsched/IR/Parser.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/OpUnitReference.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <random>

using namespace mtsched;

TEST(OpUnitRowReference, EveryConvRowEqualsTheInterpreters) {
  const char *Graphs[] = {
      // Dense 3x3 with a bias and padding.
      R"(graph @dense(%x: f32[2,6,7,5], %w: f32[4,6,3,3], %b: f32[4]) {
  %y = conv2d(%x, %w, %b) {padding = 1} : f32[2,4,7,5]
  return %y
})",
      // Grouped, dilated, strided, uneven padding, no bias.
      R"(graph @grouped(%x: f32[1,4,9,8], %w: f32[6,2,3,2]) {
  %y = conv2d(%x, %w) {stride = [2, 1], padding = [2, 1], dilation = [2, 1], groups = 2} : f32[1,6,5,9]
  return %y
})",
      // Depthwise 7x7.
      R"(graph @depthwise(%x: bf16[1,3,8,8], %w: bf16[3,1,7,7], %b: bf16[3]) {
  %y = conv2d(%x, %w, %b) {padding = 3, groups = 3} : bf16[1,3,8,8]
  return %y
})"};
  std::mt19937_64 Rng(7);
  std::uniform_real_distribution<double> U(-1, 1);
  for (const char *Src : Graphs) {
    llvm::SourceMgr SM;
    SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(Src, "t.mir"),
                          llvm::SMLoc());
    std::unique_ptr<Module> M = parseModule(SM);
    ASSERT_TRUE(M) << Src;
    const Graph &G = *M->getGraphs().front();
    const Node &N = *G.getNodes().front();
    OpUnitRowReferenceFn RowRef = lookupOpUnitRowReference(N.getOp());
    ASSERT_NE(RowRef, nullptr);
    ValueData Data;
    std::vector<const double *> Operands;
    for (const Operand &O : N.getOperands()) {
      std::vector<double> V(O.V->getType().numElements());
      for (double &D : V)
        D = U(Rng);
      Data[O.V] = HostValues(std::move(V));
    }
    for (const Operand &O : N.getOperands())
      Operands.push_back(Data[O.V].floats().data());
    ASSERT_FALSE(bool(interpretNode(N, Data)));
    const std::vector<double> &Whole = Data[N.getResult()].floats();
    int64_t Width = N.getType().innerDim();
    int64_t Rows = N.getType().numElements() / Width;
    std::vector<double> Row(Width);
    for (int64_t R = 0; R < Rows; ++R) {
      ASSERT_FALSE(bool(RowRef(N, Operands, R, Row)));
      for (int64_t C = 0; C < Width; ++C)
        ASSERT_EQ(Row[C], Whole[R * Width + C])
            << G.getName() << " row " << R << " column " << C;
    }
    // A row past the result is an error, not a read out of bounds.
    llvm::Error E = RowRef(N, Operands, Rows, Row);
    EXPECT_TRUE(bool(E));
    llvm::consumeError(std::move(E));
  }
}
