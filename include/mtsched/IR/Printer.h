//===- Printer.h - Canonical IR text ----------------------------*- C++ -*-===//
//
// The printer's output parses back to the same module, and printing that
// again gives the identical text.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_IR_PRINTER_H
#define MTSCHED_IR_PRINTER_H

#include <string>

namespace llvm {
class raw_ostream;
}

namespace mtsched {
class Module;
class Graph;
class Node;

void printModule(const Module &M, llvm::raw_ostream &OS);
void printGraph(const Graph &G, llvm::raw_ostream &OS);
/// One node as it appears in a graph body, without indentation or newline.
void printNode(const Node &N, llvm::raw_ostream &OS);
/// Microseconds as `12.5us`, `inf` for an infinite time.
void printMicros(double Us, llvm::raw_ostream &OS);
std::string moduleToString(const Module &M);

} // namespace mtsched

#endif // MTSCHED_IR_PRINTER_H
