//===- Diagnostics.cpp ----------------------------------------------------===//
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace mtsched;

char ReportedError::ID = 0;

void Diagnostics::print(llvm::SMLoc Loc, llvm::SourceMgr::DiagKind Kind,
                        const llvm::Twine &Msg) {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (Printed.emplace(Loc.getPointer(), Kind, Msg.str()).second)
    SM.PrintMessage(Loc, Kind, Msg);
}

llvm::Error Diagnostics::error(llvm::SMLoc Loc, const llvm::Twine &Msg) {
  print(Loc, llvm::SourceMgr::DK_Error, Msg);
  return llvm::make_error<ReportedError>();
}

/// Length of the run of bytes at the start of Text to keep as they are: one
/// printable ASCII character or tab, or one valid UTF-8 sequence that is not
/// a C1 control (U+0080 to U+009F, which some terminals obey); 0 if the
/// first byte must be escaped.
static size_t keptPrefix(llvm::StringRef Text) {
  auto C = static_cast<unsigned char>(Text[0]);
  if (C < 0x80)
    return (C >= 0x20 && C != 0x7f) || C == '\t' ? 1 : 0;
  unsigned Len = llvm::getNumBytesForUTF8(C);
  if (Len < 2 || Len > Text.size())
    return 0;
  const auto *P = reinterpret_cast<const llvm::UTF8 *>(Text.data());
  if (!llvm::isLegalUTF8Sequence(P, P + Len))
    return 0;
  if (C == 0xc2 && static_cast<unsigned char>(Text[1]) < 0xa0)
    return 0;
  return Len;
}

bool mtsched::hasControlBytes(llvm::StringRef Text) {
  for (size_t I = 0; I < Text.size();) {
    size_t N = keptPrefix(Text.substr(I));
    if (N == 0)
      return true;
    I += N;
  }
  return false;
}

std::string mtsched::escapeControlBytes(llvm::StringRef Text) {
  std::string Out;
  Out.reserve(Text.size());
  for (size_t I = 0; I < Text.size();) {
    size_t N = keptPrefix(Text.substr(I));
    if (N == 0) {
      static const char Hex[] = "0123456789abcdef";
      auto C = static_cast<unsigned char>(Text[I]);
      Out += "\\x";
      Out += Hex[C >> 4];
      Out += Hex[C & 15];
      ++I;
      continue;
    }
    Out.append(Text.data() + I, N);
    I += N;
  }
  return Out;
}

void mtsched::printEscapedDiagnostic(const llvm::SMDiagnostic &D,
                                     llvm::raw_ostream &OS) {
  if (!hasControlBytes(D.getMessage()) && !hasControlBytes(D.getLineContents()))
    return D.print(nullptr, OS);
  // Rebuild the diagnostic from escaped parts. The location keeps the byte
  // column of the file; only the caret moves, to stay under the character.
  llvm::StringRef Line = D.getLineContents();
  int Col = D.getColumnNo();
  std::string EscapedLine = escapeControlBytes(Line);
  size_t CaretCol =
      Col < 0 ? 0 : escapeControlBytes(Line.take_front(size_t(Col))).size();
  llvm::SMDiagnostic Header(*D.getSourceMgr(), D.getLoc(), D.getFilename(),
                            D.getLineNo(), Col, D.getKind(),
                            escapeControlBytes(D.getMessage()), "", {});
  // Printed without its (empty) source line: the escaped one follows.
  std::string Text;
  llvm::raw_string_ostream TS(Text);
  Header.print(nullptr, TS, /*ShowColors=*/false);
  llvm::StringRef HeaderLine = llvm::StringRef(TS.str()).split('\n').first;
  OS << HeaderLine << '\n';
  if (D.getLineNo() < 0 || Col < 0)
    return;
  OS << EscapedLine << '\n' << std::string(CaretCol, ' ') << "^\n";
}

static void escapingHandler(const llvm::SMDiagnostic &D, void *) {
  printEscapedDiagnostic(D, llvm::errs());
}

void mtsched::installEscapingDiagHandler(llvm::SourceMgr &SM) {
  SM.setDiagHandler(escapingHandler);
}
