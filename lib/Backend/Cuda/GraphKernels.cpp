//===- GraphKernels.cpp - Every kernel of a graph, and writing them -------===//
#include "GemmCodegen.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Backend/Cuda/AttentionCodegen.h"
#include "mtsched/Backend/Cuda/CudaCodegen.h"
#include "mtsched/Backend/Cuda/OpUnitKernels.h"
#include "mtsched/IR/OpUnit.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace mtsched;
using namespace mtsched::codegen;

static llvm::Error err(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

std::vector<KernelSource>
mtsched::generateGraphKernels(const Graph &G,
                              std::vector<std::string> &Errors) {
  std::vector<KernelSource> Out;
  auto Take = [&](llvm::Expected<KernelSource> K, const std::string &What) {
    if (K)
      Out.push_back(std::move(*K));
    else
      Errors.push_back(What + ": " + llvm::toString(K.takeError()));
  };
  // Buffer kernel groups, by kernel id.
  std::map<int, std::vector<const Node *>> Groups;
  for (const auto &N : G.getNodes()) {
    if (const auto *B = llvm::dyn_cast<BufferNode>(N.get())) {
      if (B->getKernel() != BufferNode::NoKernel)
        Groups[B->getKernel()].push_back(B);
      else
        Groups[-1 - int(B->getIndex())].push_back(B);
    }
  }
  // Values fused into a decided MTB's epilogue are computed there.
  llvm::DenseSet<const Node *> InEpilogue;
  for (const auto &N : G.getNodes())
    if (const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (M->isDecided() && M->isEpilogueFused())
        for (const Operand &E : M->getEpilogue())
          InEpilogue.insert(E.V->getDef());
  for (auto &KV : Groups) {
    std::vector<const Node *> Nodes;
    for (const Node *N : KV.second)
      if (!InEpilogue.count(N))
        Nodes.push_back(N);
    // A norm its readers run in their prologues has no kernel.
    if (Nodes.size() == 1 &&
        Nodes.front()->getAttrs().contains(PrologueIntoAttr))
      continue;
    if (Nodes.empty())
      continue;
    llvm::DenseSet<const Node *> Members(Nodes.begin(), Nodes.end());
    std::vector<const Value *> Outs;
    for (const Node *N : Nodes) {
      bool External = G.isOutput(N->getResult());
      for (const Node *U : G.getUsers(N->getResult()))
        External |= !Members.count(U);
      if (External)
        Outs.push_back(N->getResult());
    }
    std::string Name = KV.first >= 0
                           ? G.getName() + "_kernel" + std::to_string(KV.first)
                           : G.getName() + "_" + Nodes.front()->getName();
    if (isOpUnit(Nodes.front()->getOp())) {
      Take(generateOpUnitKernel(Name, *Nodes.front()), "kernel '" + Name + "'");
      continue;
    }
    // A layout op alone is a gather kernel (reshape, a view, runs
    // nothing); grouped, the group reads through it (generateGroupKernel).
    if (Nodes.size() == 1 && isLayout(Nodes.front()->getOp())) {
      if (Nodes.front()->getOp() != OpCode::Reshape)
        Take(generateLayoutKernel(Name, *Nodes.front()),
             "kernel '" + Name + "'");
      continue;
    }
    Take(generateGroupKernel(Name, Nodes, Outs), "kernel '" + Name + "'");
  }
  for (const auto &N : G.getNodes()) {
    const auto *M = llvm::dyn_cast<MultiTemplateBufferNode>(N.get());
    if (M && M->getOp() == OpCode::SwiGlu) {
      // The norm of its input in its prologue (select-prologue).
      if (M->isDecided() && M->getAttrs().contains(PrologueAttr)) {
        Take(generatePrologueKernel(G, *M), "'%" + M->getName() + "' prologue");
        continue;
      }
      for (const Choice &C : M->getChoices())
        if (std::optional<GemmTileConfig> T = swigluTileOf(C))
          if (!M->isDecided() || M->getDecision() == C.Name)
            Take(generateSwiGluKernel(*M, *T),
                 "'%" + M->getName() + "' choice '" + C.Name + "'");
      continue;
    }
    // An op unit's kernels by choice (conv2d's tiles); its library
    // choices (extern.cudnn) have none.
    if (M && hasOpUnitChoices(M->getOp())) {
      for (const Choice &C : M->getChoices())
        if (!C.isExtern() && (!M->isDecided() || M->getDecision() == C.Name))
          Take(generateOpUnitChoiceKernel(
                   G.getName() + "_" + M->getName() + "_" + C.Name, *M, C.Name),
               "'%" + M->getName() + "' choice '" + C.Name + "'");
      continue;
    }
    if (M && M->getOp() == OpCode::Attention) {
      for (const Choice &C : M->getChoices())
        if (!M->isDecided() || M->getDecision() == C.Name)
          Take(generateAttentionKernel(*M, C),
               "'%" + M->getName() + "' choice '" + C.Name + "'");
      continue;
    }
    // One rank's uneven all_to_all runs as a copy kernel under --run.
    if (M && M->getOp() == OpCode::AllToAll && M->getNumOperands() == 3 &&
        G.getWorldSize() == 1) {
      Take(generateRaggedCopyKernel("ragged_" + M->getName(), *M),
           "'%" + M->getName() + "'");
      continue;
    }
    if (!M || M->getOp() != OpCode::MatMul)
      continue;
    // A merged horizontal group is one kernel, named after its leader.
    if (M->isDecided() && M->getAttrs().contains(HorizontalOfAttr))
      continue;
    if (M->isDecided() && M->getAttrs().contains(HorizontalAttr)) {
      Take(generateHorizontalGroupKernel(G, *M),
           "'%" + M->getName() + "' horizontal group");
      continue;
    }
    // A GEMM with the norm of its A in its prologue (select-prologue).
    if (M->isDecided() && M->getAttrs().contains(PrologueAttr)) {
      Take(generatePrologueKernel(G, *M), "'%" + M->getName() + "' prologue");
      continue;
    }
    for (const Choice &C : M->getChoices()) {
      std::optional<GemmTileConfig> T = gemmTileOf(C);
      if (!T)
        continue;
      if (M->isDecided() && M->getDecision() != C.Name)
        continue;
      std::string What = "'%" + M->getName() + "' choice '" + C.Name + "'";
      if (M->isDecided()) {
        Take(generateGemmKernel(*M, *T, M->isEpilogueFused()), What);
        continue;
      }
      Take(generateGemmKernel(*M, *T, false), What);
      if (!M->getEpilogue().empty()) {
        llvm::Expected<KernelSource> F = generateGemmKernel(*M, *T, true);
        if (F)
          Out.push_back(std::move(*F));
        else
          llvm::consumeError(F.takeError()); // cannot fuse: not a bug
      }
    }
  }
  return Out;
}

llvm::Error mtsched::dumpKernels(llvm::ArrayRef<KernelSource> Kernels,
                                 llvm::StringRef Dir) {
  if (std::error_code EC = llvm::sys::fs::create_directories(Dir))
    return err("cannot create '" + Dir + "': " + EC.message());
  for (const KernelSource &K : Kernels) {
    llvm::SmallString<256> Path(Dir);
    llvm::sys::path::append(Path, K.Name + ".cu");
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    if (EC)
      return err("cannot write '" + Path + "': " + EC.message());
    OS << "// launch: grid (" << K.GridX << ", " << K.GridY << ", " << K.GridZ
       << "), block " << K.BlockX << ", dynamic shared memory " << K.SharedBytes
       << " bytes"
       << (K.Persistent ? "; persistent: at most one CTA per SM walks the "
                          "grid's x"
                        : "");
    // (bench/device/attn-dec-timeline.py encodes the maps as the launcher
    // does, from this.)
    if (!K.TensorMaps.empty())
      OS << "; tensor maps' L2 promotion " << K.TensorMaps[0].L2PromotionBytes
         << " bytes";
    OS << "\n" << K.Source;
  }
  return llvm::Error::success();
}
