//===- CalibrateImpl.h - What Calibrate's files share -----------*- C++ -*-===//
//
// Private to lib/Tools: the calibration library is split into
// Calibrate.cpp (the fit and its printout), CalibrateSamples.cpp (a
// report's measured times as samples) and CalibrateLoad.cpp (reading a
// report file and its IR, and placing a bad value at FILE:LINE:COL).
// A bad value found while collecting samples travels to the loader, which
// has the text, as a ReportValueError with its path in the document.
//
//===----------------------------------------------------------------------===//
#ifndef MTSCHED_LIB_TOOLS_CALIBRATEIMPL_H
#define MTSCHED_LIB_TOOLS_CALIBRATEIMPL_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mtsched {
namespace detail {

/// A message-only error; the caller adds where (file, node, choice).
inline llvm::Error bad(const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Msg);
}

/// One step of a path into a JSON document: an object key or an array
/// index.
struct JsonStep {
  std::string Key;
  size_t Index = 0;
  bool IsKey = true;
  JsonStep(llvm::StringRef K) : Key(K.str()) {}
  JsonStep(size_t I) : Index(I), IsKey(false) {}
};

/// A bad value in a report: what is wrong with it and where it is, so that
/// loadCalibrationSamples, which has the text, can say FILE:LINE:COL.
class ReportValueError : public llvm::ErrorInfo<ReportValueError> {
public:
  static char ID;
  ReportValueError(std::vector<JsonStep> Path, std::string Msg)
      : Path(std::move(Path)), Msg(std::move(Msg)) {}
  void log(llvm::raw_ostream &OS) const override { OS << Msg; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  std::vector<JsonStep> Path;
  std::string Msg;
};

} // namespace detail
} // namespace mtsched

#endif // MTSCHED_LIB_TOOLS_CALIBRATEIMPL_H
