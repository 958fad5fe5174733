//===- DecisionTable.h - Thread ranks' decisions, kept off the IR -*- C++ -*-=//
//
// Thread ranks that share one immutable module (docs/RANKS.md, "Resources
// of thread ranks") do not write their decisions into it: each rank decides
// a stand-in copy of one node at a time (Node::cloneStandIn), adds it to
// its own DecisionDigest and offers it to the one DecisionTable the ranks
// share, which keeps the first stand-in offered for each node. Ranks decide
// identically, so one copy of the decisions suffices; the digests tell
// whether they did (equal digests: equal decided IR). After the ranks have
// joined, the table is applied to the module, which is printed once.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_AUTOTUNE_DECISIONTABLE_H
#define MTSCHED_AUTOTUNE_DECISIONTABLE_H

#include "mtsched/IR/Graph.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_sha1_ostream.h"
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace mtsched {

/// One rank's decisions, as a hash: every field deciding sets.
class DecisionDigest {
public:
  void add(unsigned GraphIndex, const MultiTemplateBufferNode &Decided);
  /// SHA1 in hex of everything added, in order.
  std::string result();

private:
  llvm::raw_sha1_ostream OS;
};

/// The decided stand-ins of a module's nodes, shared by every thread rank.
class DecisionTable {
public:
  /// A slot per node of each of M's graphs (M must not change until apply).
  explicit DecisionTable(const Module &M);
  ~DecisionTable();
  /// Keeps Decided, a decided stand-in for node Decided.getIndex() of graph
  /// number GraphIndex, unless a rank offered one for that node before.
  /// Any thread may offer at any time.
  void offer(unsigned GraphIndex,
             std::unique_ptr<MultiTemplateBufferNode> Decided);
  /// Writes every kept decision into M (after every rank has finished).
  llvm::Error apply(Module &M) const;

private:
  std::vector<std::vector<std::atomic<MultiTemplateBufferNode *>>> Slots;
};

} // namespace mtsched

#endif // MTSCHED_AUTOTUNE_DECISIONTABLE_H
