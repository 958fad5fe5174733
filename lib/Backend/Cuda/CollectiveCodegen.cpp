//===- CollectiveCodegen.cpp - Peer-memory collective kernels -------------===//
//
// See CollectiveCodegen.h for the protocol. The generated source is one
// template (CollectiveKernels.cpp) specialised by a few constants (ranks,
// sizes, dtype, epilogue); the epilogue is read off the graph in
// CollectiveEpilogue.cpp.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Backend/Cuda/CollectiveCodegen.h"
#include "CollectiveKernels.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/IR/Graph.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include <algorithm>

using namespace mtsched;
using namespace mtsched::collective;

static llvm::Error fail(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

llvm::Expected<CollectiveKernel>
mtsched::generateCollectiveKernel(const CollectiveKernelSpec &S) {
  // `hier` is NCCL calls; only its fused all_reduce has a kernel: the
  // epilogue over the rank's reduced shard (Elems of them), which reads no
  // peer's memory (one "rank", no barriers).
  bool Hier = S.Algo == CollectiveAlgo::Hier;
  if (Hier && S.Epilogue.empty())
    return fail("'hier' without an epilogue is NCCL calls on per-host and "
                "cross-host communicators, not a peer-memory kernel");
  if (Hier && S.Kind != CollectiveKind::AllReduce)
    return fail("'hier' fuses an epilogue onto all_reduce only, not " +
                collectiveKindName(S.Kind));
  if (!Hier && (S.Ranks < 2 || S.Ranks > MaxCollectiveRanks))
    return fail("peer-memory kernels run 2 to " +
                llvm::Twine(MaxCollectiveRanks) + " ranks, not " +
                llvm::Twine(S.Ranks));
  if (S.Dtype != DType::BF16 && S.Dtype != DType::F16 && S.Dtype != DType::F32)
    return fail("peer-memory kernels reduce bf16, f16 or f32, not " +
                dtypeName(S.Dtype));
  if (S.Elems <= 0)
    return fail("an empty collective has no kernel");
  bool AllReduce = S.Kind == CollectiveKind::AllReduce;
  bool TwoShot = S.Algo == CollectiveAlgo::TwoShot;
  const char *Body = nullptr;
  std::string AlgoName(collectiveAlgoName(S.Algo));
  if (AllReduce && (S.Algo == CollectiveAlgo::OneShot || TwoShot || Hier)) {
    Body = S.Epilogue.RmsNorm ? RowAllReduce : FlatAllReduce;
  } else if (S.Algo == CollectiveAlgo::P2P &&
             (S.Kind == CollectiveKind::AllGather ||
              S.Kind == CollectiveKind::ReduceScatter ||
              S.Kind == CollectiveKind::AllToAll)) {
    Body = P2P;
    if (!S.Epilogue.empty())
      return fail("p2p carries no epilogue");
    if (S.Kind != CollectiveKind::AllGather && S.Elems % S.Ranks)
      return fail(collectiveKindName(S.Kind) + " of " + llvm::Twine(S.Elems) +
                  " elements over " + llvm::Twine(S.Ranks) + " ranks");
  } else {
    return fail("'" + AlgoName + "' does not implement " +
                collectiveKindName(S.Kind));
  }
  const CollectiveEpilogue &Ep = S.Epilogue;
  int64_t Cols = S.Cols > 0 ? S.Cols : S.Elems;
  // The shard starts at a multiple of its length: whole rows keep the
  // bias's and the norm's columns (and each row inside one rank's shard).
  if (Hier && S.Elems % Cols)
    return fail("the shard of " + llvm::Twine(S.Elems) +
                " elements is not whole rows of " + llvm::Twine(Cols) +
                ", which 'hier' needs to run the epilogue on its shard");
  if ((Ep.Bias || Ep.RmsNorm) && S.Elems % Cols)
    return fail("rows of " + llvm::Twine(Cols) + " do not tile " +
                llvm::Twine(S.Elems) + " elements");
  if (Ep.RmsNorm && Ep.Activation)
    return fail("an activation before rmsnorm is not fused");
  if (Ep.WriteSum && !Ep.Bias && !Ep.Residual)
    return fail("a second output holds the sum after a bias or residual add");
  int VecElems = S.Dtype == DType::F32 ? 4 : 8;

  CollectiveKernel K;
  K.Name = "coll_" + std::string(collectiveKindName(S.Kind)) + "_" + AlgoName +
           "_" + std::string(dtypeName(S.Dtype)) +
           (Hier ? std::string() : "_w" + std::to_string(S.Ranks)) + "_n" +
           std::to_string(S.Elems) +
           (Ep.empty() ? std::string()
                       : "_" + Ep.name() + "_c" + std::to_string(Cols));
  unsigned MaxGrid =
      unsigned(std::min<int64_t>(MaxCollectiveBlocks, std::max(1, 2 * S.SMs)));
  int64_t Units;
  if (Ep.RmsNorm) {
    int64_t Rows = S.Elems / Cols;
    int64_t Items = Cols % VecElems == 0 ? Cols / VecElems : Cols;
    int64_t BT = std::min<int64_t>(
        1024, std::max<int64_t>(64, ((Items + 31) / 32) * 32));
    if ((Items + BT - 1) / BT > 32)
      return fail("rows of " + llvm::Twine(Cols) +
                  " elements are too long for the fused rmsnorm");
    K.BlockX = unsigned(BT);
    Units = TwoShot ? (Rows + S.Ranks - 1) / S.Ranks : Rows;
    K.GridX = unsigned(std::max<int64_t>(1, std::min<int64_t>(MaxGrid, Units)));
  } else {
    K.BlockX = 512;
    int64_t Work = S.Elems / VecElems;
    if (TwoShot)
      Work = (Work + S.Ranks - 1) / S.Ranks;
    if (S.Kind == CollectiveKind::AllGather)
      Work = S.Elems * S.Ranks / VecElems;
    if (S.Kind == CollectiveKind::ReduceScatter)
      Work = S.Elems / S.Ranks / VecElems;
    if (S.Kind == CollectiveKind::AllToAll)
      Work = S.Elems / VecElems;
    Work = std::max<int64_t>(Work, 1);
    Units = (Work + K.BlockX - 1) / K.BlockX;
    K.GridX = unsigned(std::max<int64_t>(1, std::min<int64_t>(MaxGrid, Units)));
  }
  std::string D;
  auto Def = [&](const std::string &Name, const std::string &V) {
    D += "#define " + Name + " " + V + "\n";
  };
  bool F32 = S.Dtype == DType::F32;
  Def("IS_F32", F32 ? "1" : "0");
  Def("FROM", S.Dtype == DType::F16 ? "h2f" : "bf2f");
  Def("TO", S.Dtype == DType::F16 ? "f2h" : "f2bf");
  Def("W", Hier ? "1" : std::to_string(S.Ranks));
  Def("HIER", Hier ? "1" : "0");
  // A shard of a length that is no multiple of the vector starts, on some
  // rank, where vector loads would be misaligned.
  Def("SCALAR", (Hier && S.Elems % VecElems != 0) ? "1" : "0");
  Def("MAXB", std::to_string(MaxCollectiveBlocks));
  Def("NELEMS", std::to_string(S.Elems) + "ll");
  Def("COLS", std::to_string(Cols) + "ll");
  Def("TWO_SHOT", TwoShot ? "1" : "0");
  Def("GATHER", S.Kind == CollectiveKind::AllGather ? "1" : "0");
  Def("A2A", S.Kind == CollectiveKind::AllToAll ? "1" : "0");
  // Elements each rank's input gives this rank (gather and all_to_all).
  Def("CHUNK", S.Kind == CollectiveKind::AllToAll
                   ? std::to_string(S.Elems / S.Ranks) + "ll"
                   : "NELEMS");
  Def("EPI_BIAS", Ep.Bias ? "1" : "0");
  Def("EPI_RES", Ep.Residual ? "1" : "0");
  // The activation is the op table's expression of its one operand.
  if (Ep.Activation)
    Def("EPI_ACT(x)", expandCudaExpr(*Ep.Activation, {"(x)"}));
  Def("EPI_ANY", Ep.empty() ? "0" : "1");
  Def("EPI_SUM", Ep.WriteSum ? "1" : "0");
  Def("EPS", llvm::formatv("{0:e}f", Ep.Eps).str());
  Def("BT", std::to_string(K.BlockX));
  Def("NAME", K.Name);
  K.Source = D + Prelude + Body;
  return K;
}

std::vector<KernelSource>
mtsched::generateGraphCollectiveKernels(const Module &M, const Graph &G,
                                        std::vector<std::string> &Errors,
                                        int SMs) {
  std::vector<KernelSource> Out;
  for (const auto &N : G.getNodes()) {
    const auto *C = llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(N.get());
    if (!C || !C->isDecided())
      continue;
    std::optional<CollectiveAlgo> A = collectiveAlgoOf(C->getDecision());
    // NCCL is a library call: there is no source to show; nor for `hier`
    // unfused (NCCL calls only).
    if (!A || *A == CollectiveAlgo::Nccl ||
        (*A == CollectiveAlgo::Hier && !C->isEpilogueFused()))
      continue;
    std::string What =
        "'%" + C->getName() + "' choice '" + C->getDecision() + "'";
    CollectiveKernelSpec S;
    S.Kind = C->getCollectiveKind();
    S.Algo = *A;
    const TensorType &In = C->getOperand(0)->getType();
    S.Dtype = In.Dtype;
    S.Ranks = int(G.getWorldSize());
    if (const ProcessGroup *PG = M.findGroup(C->getGroup()))
      S.Ranks = int(PG->Ranks.size());
    S.Elems = In.numElements();
    S.Cols = In.Shape.empty() ? S.Elems : In.Shape.back();
    if (S.Cols <= 0 || S.Elems % S.Cols)
      S.Cols = S.Elems;
    S.SMs = SMs;
    if (*A == CollectiveAlgo::Hier) {
      // The kernel covers one rank's shard: the input over the ranks of a
      // host, which lowering wrote into the choice (`per_host`).
      std::optional<int64_t> PerHost;
      for (const Choice &Ch : C->getChoices())
        if (Ch.Name == C->getDecision())
          PerHost = Ch.Params.getInt("per_host");
      if (!PerHost || *PerHost < 1 || S.Elems % *PerHost) {
        Errors.push_back(What + ": no `per_host` that splits " +
                         std::to_string(S.Elems) + " elements");
        continue;
      }
      S.Elems /= *PerHost;
    }
    if (C->isEpilogueFused()) {
      const Value *Bias = nullptr, *Res = nullptr, *Gamma = nullptr;
      llvm::Expected<CollectiveEpilogue> E =
          collectiveEpilogueOf(*C, Bias, Res, Gamma);
      if (!E) {
        Errors.push_back(What + ": " + llvm::toString(E.takeError()));
        continue;
      }
      S.Epilogue = *E;
    }
    llvm::Expected<CollectiveKernel> K = generateCollectiveKernel(S);
    if (!K) {
      Errors.push_back(What + ": " + llvm::toString(K.takeError()));
      continue;
    }
    KernelSource KS;
    // Kernel names are per shape and algorithm; the node's name keeps two
    // collectives of one shape apart in the dump directory.
    KS.Name = sanitizeIdentifier(C->getName()) + "_" + K->Name;
    KS.Source = std::move(K->Source);
    KS.GridX = K->GridX;
    KS.BlockX = K->BlockX;
    KS.Inputs.push_back(C->getOperand(0));
    // The result is the `outs` parameter; a fused epilogue's value after
    // the adds (`writes`) is `sums`.
    if (S.Epilogue.WriteSum)
      KS.Outputs.push_back(C->getEpilogueWrites().front().V);
    KS.Outputs.push_back(C->getResult());
    Out.push_back(std::move(KS));
  }
  return Out;
}
