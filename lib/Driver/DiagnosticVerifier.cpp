//===- DiagnosticVerifier.cpp ---------------------------------------------===//
#include "mtsched/Driver/DiagnosticVerifier.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;

static llvm::StringRef kindName(llvm::SourceMgr::DiagKind K) {
  switch (K) {
  case llvm::SourceMgr::DK_Error:
    return "error";
  case llvm::SourceMgr::DK_Warning:
    return "warning";
  case llvm::SourceMgr::DK_Note:
    return "note";
  case llvm::SourceMgr::DK_Remark:
    return "remark";
  }
  return "error";
}

DiagnosticVerifier::DiagnosticVerifier(llvm::SourceMgr &SM,
                                       llvm::raw_ostream &Errs)
    : SM(SM), Errs(Errs) {
  const llvm::MemoryBuffer *Buf = SM.getMemoryBuffer(SM.getMainFileID());
  llvm::StringRef Text = Buf->getBuffer();
  int64_t NumLines = int64_t(Text.count('\n')) + 1;
  // expected-KIND [@+N | @-N | @N] {{message}}
  llvm::Regex Re("expected-(error|warning|note|remark)[ \t]*(@[+-]?[0-9]+)?"
                 "[ \t]*\\{\\{(.*)\\}\\}");
  unsigned LineNo = 0;
  while (!Text.empty()) {
    ++LineNo;
    auto [Line, Rest] = Text.split('\n');
    Text = Rest;
    size_t Pos = Line.find("expected-");
    if (Pos == llvm::StringRef::npos || !Line.substr(0, Pos).contains("//"))
      continue;
    llvm::SmallVector<llvm::StringRef, 4> M;
    llvm::SMLoc Loc = llvm::SMLoc::getFromPointer(Line.data() + Pos);
    if (!Re.match(Line.substr(Pos), &M)) {
      SM.PrintMessage(Errs, Loc, llvm::SourceMgr::DK_Error,
                      "malformed expectation; expected "
                      "'expected-error [@+N] {{message}}'");
      Malformed = true;
      continue;
    }
    Expected E;
    E.Kind = llvm::StringSwitch<llvm::SourceMgr::DiagKind>(M[1])
                 .Case("error", llvm::SourceMgr::DK_Error)
                 .Case("warning", llvm::SourceMgr::DK_Warning)
                 .Case("note", llvm::SourceMgr::DK_Note)
                 .Default(llvm::SourceMgr::DK_Remark);
    E.Line = LineNo;
    if (!M[2].empty()) {
      // @+N and @-N are relative to this line, @N is absolute.
      llvm::StringRef Offset = M[2].drop_front();
      bool Relative = Offset.front() == '+' || Offset.front() == '-';
      Offset.consume_front("+");
      int64_t N = 0;
      int64_t Target = 0;
      if (!Offset.getAsInteger(10, N))
        Target = Relative ? int64_t(LineNo) + N : N;
      if (Target < 1 || Target > NumLines) {
        SM.PrintMessage(Errs, Loc, llvm::SourceMgr::DK_Error,
                        "expectation names line " + M[2] +
                            ", which is not a line of this file");
        Malformed = true;
        continue;
      }
      E.Line = unsigned(Target);
    }
    E.Substring = M[3].str();
    E.Loc = Loc;
    Expectations.push_back(std::move(E));
  }
  SM.setDiagHandler(&DiagnosticVerifier::handle, this);
}

DiagnosticVerifier::~DiagnosticVerifier() { SM.setDiagHandler(nullptr); }

void DiagnosticVerifier::handle(const llvm::SMDiagnostic &D, void *Self) {
  static_cast<DiagnosticVerifier *>(Self)->handle(D);
}

void DiagnosticVerifier::handle(const llvm::SMDiagnostic &D) {
  for (Expected &E : Expectations)
    if (!E.Matched && E.Kind == D.getKind() &&
        unsigned(D.getLineNo()) == E.Line &&
        D.getMessage().contains(E.Substring)) {
      E.Matched = true;
      return;
    }
  Unexpected.push_back(D);
}

bool DiagnosticVerifier::finish() {
  // Our own reports must reach Errs, not handle(): SourceMgr hands every
  // message to the installed handler, even one printed to a given stream.
  SM.setDiagHandler(nullptr);
  bool OK = !Malformed;
  for (const llvm::SMDiagnostic &D : Unexpected) {
    OK = false;
    printEscapedDiagnostic(SM.GetMessage(D.getLoc(), llvm::SourceMgr::DK_Error,
                                         "unexpected " + kindName(D.getKind()) +
                                             ": " + D.getMessage()),
                           Errs);
  }
  for (const Expected &E : Expectations)
    if (!E.Matched) {
      OK = false;
      SM.PrintMessage(Errs, E.Loc, llvm::SourceMgr::DK_Error,
                      "expected " + kindName(E.Kind) + " \"" + E.Substring +
                          "\" on line " + llvm::Twine(E.Line) +
                          " was not produced");
    }
  return OK;
}
