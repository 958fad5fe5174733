//===- DotPrinter.h - The graph as Graphviz DOT -----------------*- C++ -*-===//
//
// `mtsched-opt --emit=dot` prints the module as one Graphviz digraph instead
// of IR: every graph is a cluster, every fused kernel a cluster inside it
// (buffers sharing a `kernel N`, and a multi-template buffer with the
// epilogue it absorbed), multi-template buffers carry their decision and
// its time, and collectives are drawn in their own colour. The output is
// meant for eyes (`dot -Tpng`), not for parsing back.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_DOTPRINTER_H
#define MTSCHED_IR_DOTPRINTER_H

namespace llvm {
class raw_ostream;
}

namespace mtsched {

class Module;

/// Writes M as a DOT digraph; deterministic (program order throughout).
void printModuleAsDot(const Module &M, llvm::raw_ostream &OS);

} // namespace mtsched

#endif // MTSCHED_IR_DOTPRINTER_H
