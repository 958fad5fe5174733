//===- CollectiveTest.cpp - Collectives over several GPUs -----------------===//
//
// The peer-memory kernels compile with NVRTC wherever NVRTC opens (no GPU
// needed); on a machine with two GPUs every collective choice (NCCL and the
// peer kernels, fused epilogues too) runs on two thread ranks and must match
// the fp64 reference on both, at sizes that are not multiples of the vector
// width. Without NVRTC or two GPUs the tests skip and say why.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "mtsched/Backend/Cuda/CudaApi.h"
#include "mtsched/Backend/Cuda/CudaBenchmarker.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Runtime/Communicator.h"
#include "mtsched/Schedule/Fusion.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <thread>

using namespace mtsched;

namespace {

TEST(CollectiveKernels, EveryVariantCompilesWithNvrtc) {
  llvm::Expected<const cuda::NvrtcApi &> N = cuda::loadNvrtc();
  if (!N)
    GTEST_SKIP() << "NVRTC not available: " << llvm::toString(N.takeError());
  std::vector<CollectiveKernelSpec> Specs;
  for (DType T : {DType::BF16, DType::F16, DType::F32})
    for (int64_t Elems : {int64_t(3 * 1001), int64_t(64 * 4096)}) {
      CollectiveKernelSpec S;
      S.Dtype = T;
      S.Elems = Elems;
      S.Cols = Elems == 3 * 1001 ? 1001 : 4096;
      for (CollectiveAlgo A :
           {CollectiveAlgo::OneShot, CollectiveAlgo::TwoShot}) {
        S.Kind = CollectiveKind::AllReduce;
        S.Algo = A;
        S.Epilogue = CollectiveEpilogue();
        Specs.push_back(S);
        S.Epilogue.Bias = true;
        S.Epilogue.Activation = OpCode::Gelu;
        Specs.push_back(S);
        S.Epilogue = CollectiveEpilogue();
        S.Epilogue.Residual = true;
        S.Epilogue.RmsNorm = true;
        Specs.push_back(S);
        // Two outputs: the residual sum beside the norm, and the sum
        // before the activation.
        S.Epilogue.WriteSum = true;
        Specs.push_back(S);
        S.Epilogue = CollectiveEpilogue();
        S.Epilogue.Bias = true;
        S.Epilogue.Residual = true;
        S.Epilogue.WriteSum = true;
        S.Epilogue.Activation = OpCode::Relu;
        Specs.push_back(S);
      }
      // `hier`'s epilogue kernel on one rank's shard (whole rows: here the
      // whole input, as on hosts of one rank; any multiple of a row
      // compiles alike): the flat and the row-wise body over one rank.
      S.Kind = CollectiveKind::AllReduce;
      S.Algo = CollectiveAlgo::Hier;
      S.Epilogue = CollectiveEpilogue();
      S.Epilogue.Bias = true;
      S.Epilogue.Activation = OpCode::Gelu;
      Specs.push_back(S);
      S.Epilogue = CollectiveEpilogue();
      S.Epilogue.Residual = true;
      S.Epilogue.RmsNorm = true;
      Specs.push_back(S);
      S.Epilogue.WriteSum = true;
      Specs.push_back(S);
      S.Epilogue = CollectiveEpilogue();
      S.Epilogue.Bias = true;
      S.Epilogue.Residual = true;
      S.Epilogue.WriteSum = true;
      S.Epilogue.Activation = OpCode::Relu;
      Specs.push_back(S);
      S.Epilogue = CollectiveEpilogue();
      S.Algo = CollectiveAlgo::P2P;
      S.Kind = CollectiveKind::AllGather;
      Specs.push_back(S);
      S.Kind = CollectiveKind::ReduceScatter;
      S.Elems = 2 * Elems;
      Specs.push_back(S);
      S.Kind = CollectiveKind::AllToAll;
      Specs.push_back(S);
    }
  for (const CollectiveKernelSpec &S : Specs) {
    llvm::Expected<CollectiveKernel> K = generateCollectiveKernel(S);
    ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
    // hier's kernel meets no peer: no flags, no barrier.
    if (S.Algo == CollectiveAlgo::Hier) {
      EXPECT_NE(K->Source.find("#define HIER 1"), std::string::npos);
      EXPECT_NE(K->Source.find("#define W 1"), std::string::npos);
    }
    llvm::Expected<std::string> Cubin =
        cuda::compileToCubin(K->Source, K->Name, 90);
    EXPECT_TRUE(bool(Cubin))
        << K->Name << ": " << (Cubin ? "" : llvm::toString(Cubin.takeError()));
  }
}

TEST(CollectiveKernels, SecondOutputIsTheSumAfterTheAdds) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(R"(
group @tp = [0, 1]
graph @norm(%y: bf16[4,512], %x: bf16[4,512], %g: bf16[512]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[4,512]
  %s = add(%r, %x) : bf16[4,512]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[4,512]
  return %s, %o
}
graph @adds(%y: bf16[4,512], %x: bf16[4,512], %b: bf16[512]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[4,512]
  %a = add(%r, %b) : bf16[4,512]
  %s = add(%a, %x) : bf16[4,512]
  return %a, %s
}
)",
                                                             "w.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  for (auto &G : M->getGraphs()) {
    ASSERT_FALSE(bool(createLowerPass(LoweringOptions())->run(*G)));
    ASSERT_FALSE(bool(createFusePass(FusionOptions())->run(*G)));
  }
  auto Coll = [&](int I) {
    return llvm::cast<CollectiveMultiTemplateBufferNode>(
        M->getGraphs()[I]->getNodes()[0].get());
  };
  const Value *Bias = nullptr, *Res = nullptr, *Gamma = nullptr;
  ASSERT_EQ(Coll(0)->getEpilogueWrites().size(), 1u);
  llvm::Expected<CollectiveEpilogue> E =
      collectiveEpilogueOf(*Coll(0), Bias, Res, Gamma);
  ASSERT_TRUE(bool(E)) << llvm::toString(E.takeError());
  EXPECT_TRUE(E->WriteSum);
  EXPECT_EQ(E->name(), "residual_sum_rmsnorm");
  for (CollectiveAlgo A : {CollectiveAlgo::OneShot, CollectiveAlgo::TwoShot}) {
    CollectiveKernelSpec S;
    S.Algo = A;
    S.Elems = 4 * 512;
    S.Cols = 512;
    S.Epilogue = *E;
    llvm::Expected<CollectiveKernel> K = generateCollectiveKernel(S);
    ASSERT_TRUE(bool(K)) << llvm::toString(K.takeError());
    EXPECT_NE(K->Source.find("#define EPI_SUM 1"), std::string::npos);
    EXPECT_NE(K->Source.find("MtPtrs sums"), std::string::npos);
  }
  // The first of two adds is not the kernel's sum: refused, with the reason
  // (the choice then fails as data and the unfused form runs).
  ASSERT_EQ(Coll(1)->getEpilogueWrites().size(), 1u);
  E = collectiveEpilogueOf(*Coll(1), Bias, Res, Gamma);
  ASSERT_FALSE(bool(E));
  EXPECT_NE(llvm::toString(E.takeError()).find("not the value after the adds"),
            std::string::npos);
  // A second output needs an add to hold.
  CollectiveKernelSpec S;
  S.Elems = 1024;
  S.Epilogue.WriteSum = true;
  S.Epilogue.Activation = OpCode::Relu;
  llvm::Expected<CollectiveKernel> K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  llvm::consumeError(K.takeError());
}

TEST(CollectiveKernels, UnsupportedCombinationsSayWhy) {
  CollectiveKernelSpec S;
  S.Elems = 1024;
  S.Kind = CollectiveKind::AllGather;
  S.Algo = CollectiveAlgo::OneShot;
  llvm::Expected<CollectiveKernel> K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("does not implement"),
            std::string::npos);
  // `hier` is NCCL calls (CudaHier.cpp): no kernel to generate, but for
  // its fused all_reduce's epilogue on a shard of whole rows.
  S.Kind = CollectiveKind::AllReduce;
  S.Algo = CollectiveAlgo::Hier;
  K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("not a peer-memory kernel"),
            std::string::npos);
  S.Epilogue.Residual = true;
  S.Epilogue.RmsNorm = true;
  S.Cols = 512;
  S.Elems = 1024 + 256;
  K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("is not whole rows of 512"),
            std::string::npos);
  S.Elems = 1024;
  K = generateCollectiveKernel(S);
  EXPECT_TRUE(bool(K)) << llvm::toString(K.takeError());
  S.Kind = CollectiveKind::AllGather;
  K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  EXPECT_NE(llvm::toString(K.takeError()).find("all_reduce only"),
            std::string::npos);
  S.Kind = CollectiveKind::AllReduce;
  S.Epilogue = CollectiveEpilogue();
  S.Cols = 0;
  S.Algo = CollectiveAlgo::OneShot;
  S.Ranks = 9;
  K = generateCollectiveKernel(S);
  ASSERT_FALSE(bool(K));
  llvm::consumeError(K.takeError());
}

const char *TwoRanks = R"(group @tp = [0, 1]
graph @ar(%y: bf16[3,1001], %x: bf16[3,1001], %b: bf16[1001]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[3,1001]
  %s = add(%r, %b) : bf16[3,1001]
  %o = gelu(%s) : bf16[3,1001]
  return %o
}
graph @arn(%y: bf16[5,4096], %x: bf16[5,4096], %g: bf16[4096]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[5,4096]
  %s = add(%r, %x) : bf16[5,4096]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[5,4096]
  return %o
}
graph @arn_sum(%y: bf16[5,4096], %x: bf16[5,4096], %g: bf16[4096]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[5,4096]
  %s = add(%r, %x) : bf16[5,4096]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[5,4096]
  return %s, %o
}
graph @ar_sum(%y: bf16[3,1001], %x: bf16[3,1001]) attributes {world_size = 2} {
  %r = all_reduce(%y) {reduce = "sum", group = "tp"} : bf16[3,1001]
  %s = add(%r, %x) : bf16[3,1001]
  %o = relu(%s) : bf16[3,1001]
  return %s, %o
}
graph @ag(%y: bf16[3,1001]) attributes {world_size = 2} {
  %r = all_gather(%y) {group = "tp"} : bf16[6,1001]
  return %r
}
graph @rs(%y: bf16[6,1001]) attributes {world_size = 2} {
  %r = reduce_scatter(%y) {reduce = "sum", group = "tp"} : bf16[3,1001]
  return %r
}
)";

TEST(CollectiveGpu, EveryChoiceMatchesTheReferenceOnTwoGpus) {
  int Count = cuda::deviceCount();
  if (Count < 2)
    GTEST_SKIP() << "needs two GPUs; this machine has " << Count;
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(TwoRanks, "t.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  std::vector<const MultiTemplateBufferNode *> Nodes;
  for (auto &G : M->getGraphs()) {
    ASSERT_FALSE(bool(createLowerPass(LoweringOptions())->run(*G)));
    ASSERT_FALSE(bool(createFusePass(FusionOptions())->run(*G)));
  }
  AutotuneOptions Opts;
  Opts.Backend = "cuda";
  Opts.BenchRuns = 3;
  // Early: NCCL's communicator opened ahead on its own thread, as building
  // the collectives does (the autotuner builds its walk's batch first);
  // else by the first collective measured.
  for (bool Early : {false, true}) {
    ThreadGroup Group(2);
    std::vector<std::vector<std::string>> Lines(2);
    auto Body = [&](int Rank) {
      std::unique_ptr<Communicator> Comm = Group.get(Rank);
      llvm::Expected<std::unique_ptr<Benchmarker>> B =
          createCudaBenchmarker(Opts, Rank, *Comm);
      if (!B) {
        Lines[Rank].push_back("no benchmarker: " +
                              llvm::toString(B.takeError()));
        return;
      }
      if (Early) {
        std::vector<BuildInput> Batch;
        for (auto &G : M->getGraphs())
          for (auto &N : G->getNodes())
            if (auto *C =
                    llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get()))
              Batch.push_back(BuildInput{C, describeNode(*M, *G, *C), {}});
        (*B)->getBuilder().build(Batch);
      }
      for (auto &G : M->getGraphs())
        for (auto &N : G->getNodes()) {
          auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get());
          if (!C)
            continue;
          Workload W = describeNode(*M, *G, *C);
          std::vector<std::string> Names;
          for (const Choice &Ch : C->getChoices())
            Names.push_back(Ch.Name);
          if (W.Collective != CollectiveKind::AllReduce)
            Names = {"nccl", "p2p"};
          for (const std::string &Name : Names)
            for (bool Fused : {false, true}) {
              if (Fused && (Name == "nccl" || C->getEpilogue().empty()))
                continue;
              Choice Ch{Name, {}, {}};
              Measurement Ms =
                  (*B)->getRunner().measure(*C, W, Ch, Fused, BuildResult());
              if (Ms.Status != ChoiceStatus::Ok)
                Lines[Rank].push_back("@" + G->getName() + " " + Name +
                                      (Fused ? " fused" : "") + ": " +
                                      Ms.Message);
            }
        }
    };
    std::thread T1(Body, 1);
    Body(0);
    T1.join();
    for (int R = 0; R < 2; ++R)
      for (const std::string &L : Lines[R])
        ADD_FAILURE() << (Early ? "started early, " : "") << "rank " << R
                      << ": " << L;
  }
}

/// `hier` over two thread ranks told they are on two hosts (one GPU each):
/// the intra-host communicators have one rank, the inter-host one two. On
/// two GPUs every hier must match the reference (the check in measure()),
/// unfused and fused: the epilogue kernel on the shard (here all rows),
/// the sum gathered too (@arn_sum, @ar_sum).
TEST(CollectiveGpu, HierOnTwoEmulatedHosts) {
  int Count = cuda::deviceCount();
  if (Count < 2)
    GTEST_SKIP() << "needs two GPUs; this machine has " << Count;
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(TwoRanks, "t.mir"),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  for (auto &G : M->getGraphs()) {
    ASSERT_FALSE(bool(createLowerPass(LoweringOptions())->run(*G)));
    ASSERT_FALSE(bool(createFusePass(FusionOptions())->run(*G)));
  }
  ThreadGroup Group(2);
  std::vector<std::vector<std::string>> Lines(2);
  auto Body = [&](int Rank) {
    AutotuneOptions Opts;
    Opts.Backend = "cuda";
    Opts.BenchRuns = 3;
    Opts.ChoiceTimeout = std::chrono::milliseconds(20000);
    Opts.HostName = Rank == 0 ? "host-a" : "host-b";
    std::unique_ptr<Communicator> Comm = Group.get(Rank);
    llvm::Expected<std::unique_ptr<Benchmarker>> B =
        createCudaBenchmarker(Opts, Rank, *Comm);
    if (!B) {
      Lines[Rank].push_back("no benchmarker: " + llvm::toString(B.takeError()));
      return;
    }
    for (auto &G : M->getGraphs())
      for (auto &N : G->getNodes()) {
        auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get());
        if (!C)
          continue;
        Workload W = describeNode(*M, *G, *C);
        for (bool Fused : {false, true}) {
          if (Fused && C->getEpilogue().empty())
            continue;
          Measurement Ms = (*B)->getRunner().measure(
              *C, W, Choice{"hier", {}, {}}, Fused, BuildResult());
          Lines[Rank].push_back(
              "@" + G->getName() + (Fused ? " fused " : " ") +
              (Ms.Status == ChoiceStatus::Ok ? "ok" : "failed: " + Ms.Message));
        }
      }
  };
  std::thread T1(Body, 1);
  Body(0);
  T1.join();
  for (int R = 0; R < 2; ++R) {
    ASSERT_FALSE(Lines[R].empty());
    size_t FusedLines = 0;
    for (const std::string &L : Lines[R]) {
      FusedLines += L.find(" fused ") != std::string::npos;
      EXPECT_NE(L.find(" ok"), std::string::npos) << "rank " << R << ": " << L;
    }
    // @ar, @arn, @arn_sum and @ar_sum carry epilogues.
    EXPECT_EQ(FusedLines, 4u) << "rank " << R;
  }
}

const char *FourRanks = R"(
graph @norm(%y: bf16[6,4096], %x: bf16[6,4096], %g: bf16[4096]) attributes {world_size = 4} {
  %r = all_reduce(%y) {reduce = "sum"} : bf16[6,4096]
  %s = add(%r, %x) : bf16[6,4096]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[6,4096]
  return %s, %o
}
graph @bias(%y: bf16[2,1001], %b: bf16[1001]) attributes {world_size = 4} {
  %r = all_reduce(%y) {reduce = "sum"} : bf16[2,1001]
  %s = add(%r, %b) : bf16[2,1001]
  %o = gelu(%s) : bf16[2,1001]
  return %o
}
graph @odd(%y: bf16[5,4096], %x: bf16[5,4096], %g: bf16[4096]) attributes {world_size = 4} {
  %r = all_reduce(%y) {reduce = "sum"} : bf16[5,4096]
  %s = add(%r, %x) : bf16[5,4096]
  %o = rmsnorm(%s, %g) {eps = 1.0e-05} : bf16[5,4096]
  return %s, %o
}
)";

/// The fused `hier` on two emulated hosts of two GPUs (thread ranks 0, 1 on
/// host-a, 2, 3 on host-b): each rank's epilogue covers half the rows at
/// its shard's offset, and the gathered output (and sum) must match the
/// reference on every rank; 5 rows do not split into whole-row shards, and
/// the fused form fails with that reason.
TEST(CollectiveGpu, FusedHierOnTwoEmulatedHostsOfTwo) {
  int Count = cuda::deviceCount();
  if (Count < 4)
    GTEST_SKIP() << "needs four GPUs; this machine has " << Count;
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(FourRanks, "f.mir"), llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  ASSERT_TRUE(M);
  for (auto &G : M->getGraphs()) {
    ASSERT_FALSE(bool(createLowerPass(LoweringOptions())->run(*G)));
    ASSERT_FALSE(bool(createFusePass(FusionOptions())->run(*G)));
  }
  ThreadGroup Group(4);
  std::vector<std::vector<std::string>> Lines(4);
  auto Body = [&](int Rank) {
    AutotuneOptions Opts;
    Opts.Backend = "cuda";
    Opts.BenchRuns = 3;
    Opts.ChoiceTimeout = std::chrono::milliseconds(20000);
    Opts.HostName = Rank < 2 ? "host-a" : "host-b";
    std::unique_ptr<Communicator> Comm = Group.get(Rank);
    llvm::Expected<std::unique_ptr<Benchmarker>> B =
        createCudaBenchmarker(Opts, Rank, *Comm);
    if (!B) {
      Lines[size_t(Rank)].push_back("no benchmarker: " +
                                    llvm::toString(B.takeError()));
      return;
    }
    for (auto &G : M->getGraphs())
      for (auto &N : G->getNodes()) {
        auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get());
        if (!C)
          continue;
        Workload W = describeNode(*M, *G, *C);
        for (bool Fused : {false, true}) {
          Measurement Ms = (*B)->getRunner().measure(
              *C, W, Choice{"hier", {}, {}}, Fused, BuildResult());
          Lines[size_t(Rank)].push_back(
              "@" + G->getName() + (Fused ? " fused " : " ") +
              (Ms.Status == ChoiceStatus::Ok ? "ok" : "failed: " + Ms.Message));
        }
      }
  };
  std::vector<std::thread> Ts;
  for (int R = 1; R < 4; ++R)
    Ts.emplace_back(Body, R);
  Body(0);
  for (std::thread &T : Ts)
    T.join();
  for (int R = 0; R < 4; ++R) {
    std::vector<std::string> Want = {
        "@norm ok",
        "@norm fused ok",
        "@bias ok",
        "@bias fused ok",
        "@odd ok",
        "@odd fused failed: 'hier' runs the epilogue on each rank's shard of "
        "10240 elements, which is not whole rows of 4096"};
    EXPECT_EQ(Lines[size_t(R)], Want) << "rank " << R;
  }
}

} // namespace
