//===- Timeline.cpp - The decided schedule as a trace ---------------------===//
#include "mtsched/Tools/Timeline.h"
#include "mtsched/Autotune/HorizontalSelect.h"
#include "mtsched/Autotune/PrologueSelect.h"
#include "mtsched/Autotune/TimePredictor.h"
#include "mtsched/Autotune/Workload.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/OpUnit.h"
#include "mtsched/Runtime/Roofline.h"
#include "mtsched/Schedule/Schedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mtsched;

namespace {

enum Track : int { Compute = 0, Comm = 1 };

/// One kernel or collective of a graph, placed in time.
struct Event {
  std::string Name;
  Track Stream = Compute;
  double StartUs = 0;
  double DurUs = 0;
  /// "measured" (the decision's timing) or "modelled" (the cost model).
  llvm::StringRef Source;
  const MultiTemplateBufferNode *Template = nullptr;
  std::vector<std::string> Members;
  std::vector<std::string> Epilogue;
};

llvm::Error bad(const Graph &G, const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--emit=timeline: @" + G.getName() + ": " +
                                     Msg);
}

/// The decision's timing in the IR (fused where the epilogue is), or
/// nothing when it has none that is finite.
std::optional<double> decidedUs(const MultiTemplateBufferNode &N) {
  const std::vector<ChoiceTiming> &Ts =
      N.isEpilogueFused() ? N.getFusedTimings() : N.getTimings();
  for (const ChoiceTiming &T : Ts)
    if (T.Choice == N.getDecision() && std::isfinite(T.Us))
      return T.Us;
  return std::nullopt;
}

/// A kernel of plain buffers, modelled as memory-bound: it reads what it
/// does not compute, writes what is read after it or returned, and does
/// one operation per element per node (an op unit: the number it states).
double bufferKernelUs(const Graph &G, const ScheduledKernel &K,
                      const DeviceDesc &D) {
  llvm::DenseSet<const Value *> Inside, Read;
  for (const Node *N : K.Nodes)
    for (unsigned I = 0; I < N->getNumResults(); ++I)
      Inside.insert(N->getResult(I));
  int64_t BytesRead = 0, BytesWritten = 0;
  double Flops = 0;
  for (const Node *N : K.Nodes) {
    for (const Operand &O : N->getOperands())
      if (!Inside.contains(O.V) && Read.insert(O.V).second)
        BytesRead += O.V->getType().numBytes();
    // An op unit states its own arithmetic (IR/OpUnit.h).
    const OpUnitInfo *Unit = lookupOpUnitInfo(N->getOp());
    Flops += Unit && Unit->Flops ? Unit->Flops(*N)
                                 : double(N->getType().numElements());
    for (unsigned I = 0; I < N->getNumResults(); ++I) {
      const Value *V = N->getResult(I);
      bool Escapes = G.isOutput(V);
      for (const Node *U : G.getUsers(V))
        Escapes |= !llvm::is_contained(K.Nodes, U);
      if (Escapes)
        BytesWritten += V->getType().numBytes();
    }
  }
  return pointwiseTimeUs(D, BytesRead, BytesWritten, Flops);
}

/// The events of G, placed by the list schedule.
llvm::Expected<std::vector<Event>> placeGraph(const Module &M, const Graph &G,
                                              const DeviceDesc &D) {
  for (const auto &N : G.getNodes()) {
    if (llvm::isa<OpNode>(N.get()))
      return bad(G, "'%" + N->getName() +
                        "' is not lowered; run the pipeline first "
                        "(--pipeline=default)");
    if (const auto *T = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      if (!T->isDecided())
        return bad(G, "'%" + T->getName() +
                          "' is not decided; run the pipeline first "
                          "(--pipeline=default)");
  }
  llvm::Expected<Schedule> S = buildSchedule(G);
  if (!S)
    return bad(G, toString(S.takeError()));
  std::vector<Event> Events;
  std::vector<double> Finish;
  double StreamFree[2] = {0, 0};
  for (const ScheduledKernel &K : S->Kernels) {
    Event E;
    const auto *T = llvm::dyn_cast<MultiTemplateBufferNode>(K.getLeader());
    for (const Node *N : K.Nodes)
      E.Members.push_back("%" + N->getName());
    if (T) {
      E.Template = T;
      E.Stream =
          llvm::isa<CollectiveMultiTemplateBufferNode>(T) ? Comm : Compute;
      if (T->isEpilogueFused())
        E.Epilogue.assign(E.Members.begin() + 1, E.Members.end());
      E.Name = "%" + T->getName() + " " + T->getOpName().str() + " " +
               T->getDecision();
      if (!E.Epilogue.empty())
        E.Name += " + " + std::to_string(E.Epilogue.size()) + " fused";
      const Attribute *MergedUs = T->getAttrs().get(HorizontalMergedUsAttr);
      std::optional<llvm::StringRef> Tile =
          T->getAttrs().getString(HorizontalTileAttr);
      std::optional<llvm::StringRef> Of =
          T->getAttrs().getString(HorizontalOfAttr);
      if (Tile && MergedUs && std::isfinite(MergedUs->getNumber())) {
        // A merged horizontal group: one launch for every member, at the
        // time select-horizontal priced it.
        E.Name = "%" + T->getName() + " " + T->getOpName().str() +
                 " horizontal " + Tile->str();
        E.DurUs = MergedUs->getNumber();
        E.Source = "modelled";
      } else if (Of) {
        // Computed by its group's merged GEMM: no launch of its own.
        E.Name = "%" + T->getName() + " " + T->getOpName().str() + " in %" +
                 Of->str() + "'s merged GEMM";
        E.DurUs = 0;
        E.Source = "modelled";
      } else if (std::optional<double> Us = decidedUs(*T)) {
        E.DurUs = *Us;
        E.Source = "measured";
      } else {
        // A fallback decision has no timing: the model's time of it.
        Workload W = describeNode(M, G, *T);
        const Choice *C = T->findChoice(T->getDecision());
        double Model =
            C ? predictChoiceUs(D, W, *C, T->isEpilogueFused()) : NAN;
        E.DurUs = std::isfinite(Model) ? Model : 0;
        E.Source = "modelled";
      }
      if (std::optional<llvm::StringRef> Norm =
              T->getAttrs().getString(PrologueAttr)) {
        // The norm of its A runs in its prologue (select-prologue): the
        // model's price of that on top of the GEMM.
        const Choice *C = T->findChoice(T->getDecision());
        double Extra = C ? createRooflinePredictor(D)->prologueUs(
                               describeNode(M, G, *T), *C)
                         : NAN;
        // A merged horizontal group's one launch: what select-prologue
        // priced the group's prologue at; its other members launch nothing.
        const Node *NormNode = T->getOperand(0)->getDef();
        if (Of) {
          Extra = 0;
        } else if (Tile && NormNode) {
          const Attribute *F = NormNode->getAttrs().get(PrologueFusedUsAttr);
          const Attribute *Gm = NormNode->getAttrs().get(PrologueGemmsUsAttr);
          Extra = F && Gm ? F->getNumber() - Gm->getNumber() : NAN;
        }
        if (!Of)
          E.Name += " + prologue %" + Norm->str();
        E.DurUs += std::isfinite(Extra) ? Extra : 0;
        E.Source = "modelled";
      }
    } else if (K.Nodes.size() == 1 &&
               K.getLeader()->getAttrs().contains(PrologueIntoAttr)) {
      // Run in the prologues of the GEMMs that read it: no launch.
      E.Name = E.Members.front() + " " + K.getLeader()->getOpName().str() +
               " in its readers' prologues";
      E.DurUs = 0;
      E.Source = "modelled";
    } else {
      E.Name = E.Members.size() == 1
                   ? E.Members.front() + " " + K.getLeader()->getOpName().str()
                   : llvm::join(E.Members, " + ");
      E.DurUs = bufferKernelUs(G, K, D);
      E.Source = "modelled";
    }
    double Ready = StreamFree[E.Stream];
    for (unsigned Dep : K.Deps)
      Ready = std::max(Ready, Finish[Dep]);
    E.StartUs = Ready;
    StreamFree[E.Stream] = Ready + E.DurUs;
    Finish.push_back(Ready + E.DurUs);
    Events.push_back(std::move(E));
  }
  return Events;
}

/// Trace timestamps are microseconds; three decimals keep nanoseconds and
/// the output the same on every platform.
double roundNs(double Us) { return std::round(Us * 1000) / 1000; }

} // namespace

llvm::Error mtsched::writeTimeline(const Module &M, const DeviceDesc &D,
                                   llvm::raw_ostream &OS) {
  std::vector<std::vector<Event>> PerGraph;
  for (const auto &G : M.getGraphs()) {
    llvm::Expected<std::vector<Event>> Events = placeGraph(M, *G, D);
    if (!Events)
      return Events.takeError();
    PerGraph.push_back(std::move(*Events));
  }
  bool Several = M.getGraphs().size() > 1;
  llvm::json::OStream J(OS, /*IndentSize=*/1);
  J.object([&] {
    J.attribute("displayTimeUnit", "ns");
    J.attributeObject("otherData", [&] {
      J.attribute("generator", "mtsched-opt --emit=timeline");
      J.attribute("device", D.Name);
      // When the last kernel or collective of each graph ends.
      J.attributeObject("makespan_us", [&] {
        for (size_t GI = 0; GI < PerGraph.size(); ++GI) {
          double End = 0;
          for (const Event &E : PerGraph[GI])
            End = std::max(End, E.StartUs + E.DurUs);
          J.attribute("@" + M.getGraphs()[GI]->getName(), roundNs(End));
        }
      });
    });
    J.attributeArray("traceEvents", [&] {
      int Pid = 0;
      for (size_t GI = 0; GI < PerGraph.size(); ++GI) {
        const Graph &G = *M.getGraphs()[GI];
        // Every rank runs the graph (SPMD) with the agreed times: the same
        // events on each rank's tracks.
        for (int64_t Rank = 0; Rank < std::max<int64_t>(1, G.getWorldSize());
             ++Rank, ++Pid) {
          std::string Process =
              (Several ? "@" + G.getName() + " " : std::string()) + "rank " +
              std::to_string(Rank);
          auto Meta = [&](llvm::StringRef Name, int Tid,
                          llvm::function_ref<void()> Args) {
            J.object([&] {
              J.attribute("ph", "M");
              J.attribute("name", Name);
              J.attribute("pid", Pid);
              J.attribute("tid", Tid);
              J.attributeObject("args", Args);
            });
          };
          Meta("process_name", 0, [&] { J.attribute("name", Process); });
          Meta("process_sort_index", 0,
               [&] { J.attribute("sort_index", Pid); });
          Meta("thread_name", Compute, [&] { J.attribute("name", "compute"); });
          Meta("thread_sort_index", Compute,
               [&] { J.attribute("sort_index", 0); });
          Meta("thread_name", Comm, [&] { J.attribute("name", "comm"); });
          Meta("thread_sort_index", Comm,
               [&] { J.attribute("sort_index", 1); });
          for (const Event &E : PerGraph[GI])
            J.object([&] {
              J.attribute("ph", "X");
              J.attribute("name", E.Name);
              J.attribute("cat", E.Template ? (E.Stream == Comm ? "collective"
                                                                : "template")
                                            : "kernel");
              J.attribute("pid", Pid);
              J.attribute("tid", int(E.Stream));
              J.attribute("ts", roundNs(E.StartUs));
              J.attribute("dur", roundNs(E.DurUs));
              J.attributeObject("args", [&] {
                J.attribute("graph", "@" + G.getName());
                J.attributeArray("nodes", [&] {
                  for (const std::string &N : E.Members)
                    J.value(N);
                });
                if (E.Template) {
                  J.attribute("op", E.Template->getOpName());
                  J.attribute("choice", E.Template->getDecision());
                  J.attribute("fused", E.Template->isEpilogueFused());
                  if (!E.Epilogue.empty())
                    J.attributeArray("epilogue", [&] {
                      for (const std::string &N : E.Epilogue)
                        J.value(N);
                    });
                  if (const auto *C =
                          llvm::dyn_cast<CollectiveMultiTemplateBufferNode>(
                              E.Template))
                    J.attribute("group", "@" + C->getGroup());
                }
                J.attribute("time", E.Source);
                J.attribute("us", roundNs(E.DurUs));
              });
            });
        }
      }
    });
  });
  OS << '\n';
  return llvm::Error::success();
}
