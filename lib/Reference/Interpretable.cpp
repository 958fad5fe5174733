//===- Interpretable.cpp - Whether the interpreter can run a graph -------===//
//
// checkInterpretable and the host bytes interpreting a graph needs
// (--interpret-max-bytes): what is refused before anything is evaluated.
//
//===----------------------------------------------------------------------===//
#include "mtsched/Reference/Interpreter.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <string>
#include <unistd.h>

using namespace mtsched;

static_assert(sizeof(double) == 8 && sizeof(int64_t) == 8,
              "interpretBytes counts 8 bytes an element");

/// The bytes HostValues of V hold.
static uint64_t hostBytes(const Value &V) {
  // numElements fits: the parser bounds a type's bytes by 2^63-1.
  return llvm::SaturatingMultiply<uint64_t>(uint64_t(V.getType().numElements()),
                                            8);
}

/// interpretBytes up to node Upto (null: all of G), also saying which node
/// (null: the inputs) first needs more than MaxBytes, if one does.
static uint64_t bytesNeeded(const Graph &G, const Node *Upto, uint64_t MaxBytes,
                            const Node *&Crossing, bool &Crossed) {
  uint64_t Kept = 0, Largest = 0;
  Crossing = nullptr;
  auto Add = [&](const Value &V) {
    Kept = llvm::SaturatingAdd(Kept, hostBytes(V));
    Largest = std::max(Largest, hostBytes(V));
  };
  auto Total = [&] { return llvm::SaturatingAdd(Kept, Largest); };
  for (const auto &In : G.getInputs())
    Add(*In);
  Crossed = Total() > MaxBytes;
  for (const auto &N : G.getNodes()) {
    if (Crossed)
      break;
    for (unsigned R = 0; R < N->getNumResults(); ++R)
      Add(*N->getResult(R));
    if (Total() > MaxBytes) {
      Crossing = N.get();
      Crossed = true;
    }
    if (N.get() == Upto)
      break;
  }
  return Total();
}

uint64_t mtsched::interpretBytes(const Graph &G, const Node *Upto) {
  const Node *Crossing;
  bool Crossed;
  return bytesNeeded(G, Upto, UINT64_MAX, Crossing, Crossed);
}

uint64_t mtsched::defaultInterpretMaxBytes() {
  long Pages = sysconf(_SC_PHYS_PAGES), PageSize = sysconf(_SC_PAGESIZE);
  if (Pages <= 0 || PageSize <= 0)
    return uint64_t(4) << 30;
  return llvm::SaturatingMultiply(uint64_t(Pages), uint64_t(PageSize)) / 4;
}

std::optional<InterpretRefusal> mtsched::checkInterpretable(const Graph &G,
                                                            uint64_t MaxBytes) {
  for (const auto &N : G.getNodes()) {
    // interpretNode runs a collective as one rank's identity; with more
    // ranks that would be a wrong answer, not a reference.
    if (G.getWorldSize() > 1 &&
        collectiveKindOf(N->getOp()) != CollectiveKind::None)
      return InterpretRefusal{
          N->getLoc(), "'%" + N->getName() +
                           "': the interpreter runs one rank, and this " +
                           N->getOpName().str() + " needs the values of " +
                           std::to_string(G.getWorldSize()) +
                           " ranks (world_size); interpret a one-rank graph"};
    if (N->getOp() == OpCode::Custom)
      return InterpretRefusal{N->getLoc(),
                              "'%" + N->getName() +
                                  "': the interpreter has no semantics for '" +
                                  N->getOpName().str() + "'"};
  }
  const Node *Crossing;
  bool Crossed;
  uint64_t Need = bytesNeeded(G, nullptr, MaxBytes, Crossing, Crossed);
  if (!Crossed)
    return std::nullopt;
  return InterpretRefusal{
      Crossing ? Crossing->getLoc() : G.getLoc(),
      "interpreting '@" + G.getName() + "' needs " + std::to_string(Need) +
          " bytes " +
          (Crossing ? "up to '%" + Crossing->getName() + "'"
                    : std::string("for its inputs")) +
          " (8 an element of every value, plus the largest value once "
          "more), more than --interpret-max-bytes=" +
          std::to_string(MaxBytes)};
}
