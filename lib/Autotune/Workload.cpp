//===- Workload.cpp -------------------------------------------------------===//
#include "mtsched/Autotune/Workload.h"
#include "mtsched/Autotune/BlasEpilogue.h"
#include "mtsched/Lowering/ChoiceConfig.h"
#include "mtsched/Runtime/AttentionCost.h"
#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtsched;

static constexpr double Inf = std::numeric_limits<double>::infinity();

/// Every tensor fits in int64 bytes (the parser checks), but sums of
/// several, and sizes scaled up to a size hint, may not: they saturate, so
/// the cost model sees "enormous" rather than an overflowed count.
/// A device-to-host copy of a few bytes and a stream synchronisation.
static constexpr double RaggedCountsSyncUs = 10.0;
static constexpr int64_t MaxBytes = std::numeric_limits<int64_t>::max();

static int64_t addSaturating(int64_t A, int64_t B) {
  int64_t Sum;
  return __builtin_add_overflow(A, B, &Sum) ? MaxBytes : Sum;
}

/// Scales a byte count of a full-size tensor to a size hint.
static int64_t scaled(int64_t Bytes, double Scale) {
  double V = std::round(double(Bytes) * Scale);
  // 2^63 is the first double past the int64 range.
  if (!(V < 0x1p63))
    return MaxBytes;
  return static_cast<int64_t>(V);
}

Workload mtsched::describeNode(const Module &M, const Graph &G,
                               const MultiTemplateBufferNode &N, int64_t Hint) {
  Workload W;
  const TensorType &Out = N.getType();
  // Ratio of the hinted size to the node's own, applied to full-size
  // tensors (the output and same-shape epilogue inputs).
  double Scale = 1;
  if (N.getOp() == OpCode::MatMul || N.getOp() == OpCode::SwiGlu) {
    const TensorType &A = N.getOperand(0)->getType();
    W.K = N.getOp() == OpCode::SwiGlu ? Workload::Kind::SwiGlu
                                      : Workload::Kind::Gemm;
    W.Gemm.Batch = 1;
    W.Gemm.M = Out.numElements() / Out.innerDim();
    W.Gemm.N = Out.innerDim();
    W.Gemm.K = A.innerDim();
    W.Gemm.Dtype = Out.Dtype;
    if (A.Dtype != Out.Dtype)
      W.Gemm.OperandDtype = A.Dtype;
    if (N.getNumOperands() == 4)
      W.Gemm.RowwiseScales = N.getOperand(2)->getType().numElements() != 1 ||
                             N.getOperand(3)->getType().numElements() != 1;
    if (Hint > 0) {
      Scale = double(Hint) / double(W.Gemm.M);
      W.Gemm.M = Hint;
    }
  } else if (std::optional<AttentionShape> S = attentionShapeOf(N)) {
    // Size hints count matmul rows and collective bytes; an attention is
    // always described at its own shape.
    W.K = Workload::Kind::Attention;
    W.Attn = *S;
  } else if (const auto *C =
                 llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(&N)) {
    W.K = Workload::Kind::Collective;
    W.Collective = C->getCollectiveKind();
    W.Bytes = N.getNumOperands() ? N.getOperand(0)->getType().numBytes()
                                 : Out.numBytes();
    W.Ranks = M.groupRanks(C->getGroup(), G.getWorldSize()).size();
    if (N.getNumOperands())
      W.RowElems = N.getOperand(0)->getType().innerDim();
    if (C->getCollectiveKind() == CollectiveKind::AllToAll &&
        N.getNumOperands() == 3) {
      W.Ragged = true;
      W.OutBytes = Out.numBytes();
    }
    if (Hint > 0) {
      Scale = double(Hint) / double(W.Bytes);
      W.Bytes = Hint;
    }
  } else if (const OpUnitInfo *Info = lookupOpUnitInfo(N.getOp());
             Info && Info->Choices && Info->ChoiceCost) {
    // Described at its own shape, like attention.
    W.K = Workload::Kind::OpUnit;
    for (const Operand &O : N.getOperands())
      W.InBytes = addSaturating(W.InBytes, O.V->getType().numBytes());
    W.OutBytes = Out.numBytes();
    llvm::raw_string_ostream OS(W.UnitKey);
    OS << N.getOpName();
    for (const Operand &O : N.getOperands())
      OS << ' ' << O.V->getType().str();
    OS << ' ';
    N.getAttrs().print(OS);
    for (const Choice &C : N.getChoices())
      if (std::optional<OpUnitChoiceCost> Cost = Info->ChoiceCost(N, C.Name))
        W.UnitCosts.emplace_back(C.Name, *Cost);
  } else {
    W.K = Workload::Kind::Custom;
    for (const Operand &O : N.getOperands())
      W.InBytes = addSaturating(W.InBytes, O.V->getType().numBytes());
    W.OutBytes = Out.numBytes();
  }

  EpilogueDesc &E = W.Epilogue;
  E.Dtype = Out.Dtype;
  E.Elements = scaled(Out.numElements(), Scale);
  const Value *Prev = N.getResult();
  for (const Operand &EO : N.getEpilogue()) {
    const Node *EN = EO.V->getDef();
    ++E.NumOps;
    E.FlopsPerElement += getOpInfo(EN->getOp()).FlopsPerElement;
    E.RowReduction |= isRowReduction(EN->getOp());
    for (const Operand &In : EN->getOperands()) {
      if (In.V == Prev)
        continue;
      const TensorType &T = In.V->getType();
      E.ExtraInputBytes = addSaturating(
          E.ExtraInputBytes,
          T.Shape == Out.Shape ? scaled(T.numBytes(), Scale) : T.numBytes());
    }
    Prev = EO.V;
  }
  E.ExtraWrites = int(N.getEpilogueWrites().size());
  W.BlasEpilogue = blasEpilogueOf(N).has_value();
  return W;
}

std::optional<CollectiveAlgo> mtsched::collectiveAlgoOf(const Choice &C) {
  if (std::optional<llvm::StringRef> A = C.Params.getString("algo")) {
    for (CollectiveAlgo Algo :
         {CollectiveAlgo::Nccl, CollectiveAlgo::OneShot,
          CollectiveAlgo::TwoShot, CollectiveAlgo::P2P, CollectiveAlgo::Hier})
      if (collectiveAlgoName(Algo) == *A)
        return Algo;
    return std::nullopt;
  }
  return collectiveAlgoOf(C.Name);
}

std::string mtsched::hierFusedRefusal(const Workload &W, int64_t PerHost) {
  if (W.Collective != CollectiveKind::AllReduce)
    return "'hier' fuses an epilogue onto all_reduce only; its " +
           collectiveKindName(W.Collective).str() + " ends in an NCCL call";
  int64_t Elems = W.Bytes / std::max<int64_t>(1, dtypeBytes(W.Epilogue.Dtype));
  if (PerHost < 1 || Elems % PerHost)
    return "'hier' splits an all_reduce of " + std::to_string(Elems) +
           " elements into " + std::to_string(PerHost) +
           " shards: not a multiple";
  int64_t Shard = Elems / PerHost;
  if (W.RowElems > 0 && Shard % W.RowElems)
    return "'hier' runs the epilogue on each rank's shard of " +
           std::to_string(Shard) + " elements, which is not whole rows of " +
           std::to_string(W.RowElems);
  return "";
}

double mtsched::predictChoiceUs(const DeviceDesc &D, const Workload &W,
                                const Choice &C, bool Fused) {
  // A time given outright (a custom op's config the model cannot know):
  // the kernel is opaque, so it has no fused variant.
  if (const Attribute *Cost = C.Params.get("cost_us"))
    if ((Cost->isInt() || Cost->isFloat()) &&
        std::isfinite(Cost->getNumber()) && Cost->getNumber() >= 0)
      return Fused ? Inf : Cost->getNumber();
  EpilogueDesc None;
  None.Dtype = W.Epilogue.Dtype;
  const EpilogueDesc &Epi = Fused ? W.Epilogue : None;
  if (Fused && (W.Epilogue.NumOps == 0 || !canFuseEpilogue(C, W.BlasEpilogue)))
    return Inf;
  switch (W.K) {
  case Workload::Kind::Gemm:
    // cuBLASLt's fused bias / residual: the library's GEMM, plus reading
    // the residual and bias once (its output is written either way).
    if (C.isExtern())
      return externGemmTimeUs(D, W.Gemm) +
             (Fused ? double(W.Epilogue.ExtraInputBytes) /
                          (std::max(D.HbmGBps, 1.0) * 1e3)
                    : 0.0);
    if (std::optional<GemmTileConfig> T = gemmTileOf(C))
      return gemmTimeUs(D, W.Gemm,
                        GemmTile{T->BM, T->BN, T->BK, T->Warps, T->Stages,
                                 T->Template == GemmTemplate::Wgmma, T->SplitK},
                        Epi);
    return Inf;
  case Workload::Kind::SwiGlu:
    if (std::optional<GemmTileConfig> T = swigluTileOf(C))
      return swigluTimeUs(D, W.Gemm,
                          GemmTile{T->BM, T->BN, T->BK, T->Warps, T->Stages,
                                   T->Template == GemmTemplate::Wgmma},
                          Epi);
    return Inf;
  case Workload::Kind::Attention:
    // Neither template absorbs an epilogue (whyNoEpilogue in
    // Schedule/FusionEpilogue.cpp).
    if (Fused)
      return Inf;
    if (std::optional<AttentionTile> T = attentionTileOf(C)) {
      if (T->Wg)
        return wgAttentionTimeUs(D, W.Attn, T->BQ, T->BKV, T->Stages,
                                 T->Overlap, T->PingPong, T->Persistent);
      // The decode template is priced as the one-warp mma.sync tile of
      // its stages (each consumer warp takes whole stages of BKV keys; only
      // how the keys arrive differs; the persistent form as the unsplit
      // one: its balance over the SMs is not modelled).
      if (T->Dec)
        return decAttentionSupports(W.Attn, T->BQ, T->BKV, T->Warps, T->Stages,
                                    T->Persistent)
                   ? flashAttentionTimeUs(D, W.Attn, T->BQ, T->BKV, 1,
                                          T->Splits, true, T->Stages)
                   : Inf;
      return flashAttentionTimeUs(D, W.Attn, T->BQ, T->BKV, T->Warps, T->Splits,
                                  T->Mma, T->Stages);
    }
    if (C.Name == AttentionMathChoice)
      return mathAttentionTimeUs(D, W.Attn);
    return Inf;
  case Workload::Kind::Collective: {
    std::optional<CollectiveAlgo> A = collectiveAlgoOf(C);
    if (!A)
      return Inf;
    if (W.Ragged) {
      // Only NCCL moves counted rows (its sends take host counts: a device-
      // to-host copy of the receive counts and a stream sync first); the
      // peer-memory kernels split evenly.
      if (*A != CollectiveAlgo::Nccl || Fused)
        return Inf;
      return collectiveTimeUs(D, W.Collective, *A, W.Bytes, W.Ranks, Epi) +
             RaggedCountsSyncUs;
    }
    // Lowering writes the shape of a group spanning hosts into its nccl
    // and hier choices (ChoiceConfig::collectiveChoices).
    std::optional<int64_t> Hosts = C.Params.getInt("hosts");
    std::optional<int64_t> PerHost = C.Params.getInt("per_host");
    bool Shaped = Hosts && PerHost && *Hosts >= 1 && *PerHost >= 1 &&
                  *Hosts <= W.Ranks && *Hosts * *PerHost >= W.Ranks;
    // Fused, `hier` runs the epilogue on each rank's shard: whole rows.
    if (*A == CollectiveAlgo::Hier && Fused &&
        (!Shaped || !hierFusedRefusal(W, *PerHost).empty()))
      return Inf;
    if (*A == CollectiveAlgo::Hier)
      return Shaped ? hierCollectiveTimeUs(D, W.Collective, W.Bytes,
                                           int(*Hosts), int(*PerHost), Epi)
                    : Inf;
    if (*A == CollectiveAlgo::Nccl && Shaped && *Hosts > 1) {
      // A flat ring over hosts: every step waits for its slowest hop, the
      // network link.
      DeviceDesc Net = D;
      Net.LinkGBps = std::min(D.LinkGBps, D.NetGBps);
      Net.LinkLatencyUs = std::max(D.LinkLatencyUs, D.NetLatencyUs);
      return collectiveTimeUs(Net, W.Collective, *A, W.Bytes, W.Ranks, Epi);
    }
    return collectiveTimeUs(D, W.Collective, *A, W.Bytes, W.Ranks, Epi);
  }
  case Workload::Kind::OpUnit: {
    // An op unit's kernel runs no epilogue (it absorbs none).
    if (Fused)
      return Inf;
    for (const auto &[Name, Cost] : W.UnitCosts)
      if (Name == C.Name)
        return opUnitChoiceTimeUs(D, Cost);
    return Inf;
  }
  case Workload::Kind::Custom: {
    // A custom kernel is modelled as memory-bound: it reads its inputs and
    // writes its output once; a fused epilogue adds its extra inputs only.
    double Us = pointwiseTimeUs(
        D, addSaturating(W.InBytes, Epi.ExtraInputBytes), W.OutBytes, 0);
    return Us;
  }
  }
  return Inf;
}

double mtsched::predictEpilogueUs(const DeviceDesc &D, const Workload &W) {
  if (W.Epilogue.NumOps == 0)
    return 0;
  return epilogueTimeUs(D, W.Epilogue);
}

llvm::StringRef mtsched::workloadKindName(Workload::Kind K) {
  switch (K) {
  case Workload::Kind::Gemm:
    return "gemm";
  case Workload::Kind::Collective:
    return "collective";
  case Workload::Kind::Custom:
    return "custom";
  case Workload::Kind::SwiGlu:
    return "swiglu";
  case Workload::Kind::Attention:
    return "attention";
  case Workload::Kind::OpUnit:
    return "op_unit";
  }
  return "custom";
}

std::optional<Workload::Kind> mtsched::parseWorkloadKind(llvm::StringRef Name) {
  for (Workload::Kind K : {Workload::Kind::Gemm, Workload::Kind::Collective,
                           Workload::Kind::Custom, Workload::Kind::SwiGlu,
                           Workload::Kind::Attention, Workload::Kind::OpUnit})
    if (workloadKindName(K) == Name)
      return K;
  return std::nullopt;
}
