//===- VerifierImpl.h - The verifier's state, shared by its files -*- C++
//-*-===//
//
// Private to lib/IR: Verifier.cpp checks structure, epilogues, choices and
// decisions; OpTypes.cpp applies each op's type rule from the op table
// (with LayoutTypes.cpp, OpTypesMatMul.cpp and OpTypesCollective.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_IR_VERIFIERIMPL_H
#define MTSCHED_LIB_IR_VERIFIERIMPL_H

#include "mtsched/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SourceMgr.h"
#include <optional>
#include <string>
#include <vector>

namespace mtsched {
namespace detail {

using llvm::SMLoc;
using llvm::Twine;

class Verifier {
public:
  Verifier(const Module &M, llvm::SourceMgr &SM) : M(M), SM(SM) {
    for (const ProcessGroup &G : M.getGroups())
      GroupsByName.try_emplace(G.Name, &G);
  }

  unsigned run() {
    for (const ProcessGroup &G : M.getGroups())
      for (int64_t R : G.Ranks)
        if (R < 0)
          error(G.Loc, "group '@" + G.Name + "' has negative rank " + Twine(R));
    for (const auto &G : M.getGraphs())
      verifyGraph(*G);
    return NumErrors;
  }

private:
  void error(SMLoc Loc, const Twine &Msg) {
    SM.PrintMessage(Loc, llvm::SourceMgr::DK_Error, Msg);
    ++NumErrors;
  }

  void verifyGraph(const Graph &G);
  void verifyNode(const Graph &G, const Node &N);
  /// Checks op-specific operand and attribute rules and computes the types
  /// of N's results into Results (opNumResults of them); returns false
  /// (after reporting) if they cannot be computed.
  bool inferType(const Graph &G, const Node &N,
                 llvm::MutableArrayRef<TensorType> Results);
  bool inferCollective(const Graph &G, const Node &N, TensorType &Result);
  bool inferRaggedAllToAll(const Node &N, int64_t GroupSize,
                           TensorType &Result);
  /// The operand count and element types of a matmul (fp8 ones with their
  /// scales); the shapes are inferType's.
  bool inferMatMul(const Node &N);
  bool inferMatMulShape(const Node &N, TensorType &Result);
  bool checkOperandCount(const Node &N, const OpInfo &Info);
  bool inferRowReduction(const Node &N, const OpInfo &Info, TensorType &Result);
  bool inferLayerNorm(const Node &N);
  bool inferSwiGlu(const Graph &G, const Node &N, TensorType &Result);
  bool inferAttention(const Node &N, TensorType &Result);
  /// reshape, expand, transpose, slice, index_select, gather, concat
  /// (LayoutTypes.cpp), one function per op below it.
  bool inferLayout(const Node &N, TensorType &Result);
  bool inferReshapeOrExpand(const Node &N, TensorType &Result);
  bool inferTranspose(const Node &N, TensorType &Result);
  bool inferSlice(const Node &N, TensorType &Result);
  bool inferIndexSelectOrGather(const Node &N, TensorType &Result);
  bool inferConcat(const Node &N, TensorType &Result);
  /// Integer attribute Key of layout op N: Default where absent and not
  /// Required; nullopt after an error.
  std::optional<int64_t> layoutIntAttr(const Node &N, const char *Key,
                                       int64_t Default, bool Required);
  /// N's `dim` for an operand of rank Rank, negative counting from the end.
  std::optional<int64_t> layoutDimAttr(const Node &N, int64_t Rank);
  /// `alternative_of = "v"`: N computes %v another way and nothing reads N.
  void verifyAlternatives(const Graph &G);
  void verifyMTB(const Graph &G, const MultiTemplateBufferNode &N);
  /// Checks that every epilogue can be fused as written: each member
  /// consumes the one before it, reads only values computed before its
  /// template runs, belongs to one epilogue only, and every value read
  /// outside the fused kernel is written by it (docs/IR.md, "Epilogues").
  void verifyEpilogues(const Graph &G);
  /// The part of verifyEpilogues about what M's fused kernel writes: the
  /// last member and the 'writes' list, exactly the members read outside
  /// it (InKernel: the template's result and its members; Users: each
  /// value's readers; Returned: the graph's outputs).
  void verifyEpilogueWrites(
      const MultiTemplateBufferNode &M,
      const llvm::DenseSet<const Value *> &InKernel,
      const llvm::DenseMap<const Value *, llvm::SmallVector<const Node *, 2>>
          &Users,
      const llvm::DenseSet<const Value *> &Returned);
  void verifyChoiceParams(const Choice &C, SMLoc Loc, llvm::StringRef What);
  void verifyChoices(const Node &N, llvm::ArrayRef<Choice> Choices,
                     llvm::StringRef What);
  void verifyTimings(const MultiTemplateBufferNode &N,
                     llvm::ArrayRef<ChoiceTiming> Timings,
                     llvm::StringRef Clause);
  /// Size of the group a node runs on, or 0 after reporting an error.
  int64_t groupSize(const Graph &G, llvm::StringRef Name, SMLoc Loc);
  /// Name of the process group an op's attributes select; None (reported
  /// if Report is set) when the attribute is not a string.
  std::optional<std::string> groupAttr(const Node &N, bool Report = true);

  static std::string name(const Value *V) { return "'%" + V->getName() + "'"; }

  /// Whether List has a choice called Name. Lists are usually short and
  /// scanned; a long one (a custom op's thousands of configs) gets a set of
  /// its names, built once, so that checking every timing and dispatch
  /// entry against it stays linear.
  bool hasChoice(const std::vector<Choice> &List, llvm::StringRef Name);
  static constexpr size_t SmallList = 8;

  const Module &M;
  llvm::SourceMgr &SM;
  unsigned NumErrors = 0;
  /// Program position of each value's definition; inputs are -1.
  llvm::DenseMap<const Value *, int> Position;
  /// Nodes with an `alternative_of` attribute, checked after the graph.
  std::vector<const Node *> Alternatives;
  /// Choice lists verified without errors.
  llvm::DenseSet<const std::vector<Choice> *> CleanChoiceLists;
  /// The names of each long choice list (see hasChoice).
  llvm::DenseMap<const std::vector<Choice> *, llvm::StringSet<>> ChoiceNames;
  /// The module's groups by name, and the world size of the graph being
  /// verified: looked up for every collective node.
  llvm::StringMap<const ProcessGroup *> GroupsByName;
  int64_t WorldSize = 1;
};

} // namespace detail
} // namespace mtsched

#endif // MTSCHED_LIB_IR_VERIFIERIMPL_H
