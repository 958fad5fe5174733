//===- AutotuneObserver.cpp - Watching the autotuner ----------------------===//
#include "mtsched/Autotune/AutotuneObserver.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>

using namespace mtsched;
using Clock = std::chrono::steady_clock;

AutotuneObserver::~AutotuneObserver() = default;

static double msSince(Clock::time_point T) {
  return std::chrono::duration<double, std::milli>(Clock::now() - T).count();
}

namespace {

class ProgressLine : public AutotuneObserver {
public:
  void nodeHandled(size_t Done, size_t Total) override {
    if (!llvm::errs().is_displayed())
      return;
    if (msSince(Start) < 1000 && !Shown)
      return;
    // At most ten redraws a second (and always the last): redrawing per
    // node wrote megabytes to the terminal on large graphs.
    if (Done != Total && Shown && msSince(Last) < 100)
      return;
    Shown = true;
    Last = Clock::now();
    llvm::errs() << "\r[mtsched] autotuning " << Done << "/" << Total
                 << " nodes";
    if (Done == Total)
      llvm::errs() << '\n';
    llvm::errs().flush();
  }

private:
  Clock::time_point Start = Clock::now();
  Clock::time_point Last;
  bool Shown = false;
};

} // namespace

std::unique_ptr<AutotuneObserver> mtsched::createProgressLine(int Rank) {
  if (Rank != 0)
    return nullptr;
  return std::make_unique<ProgressLine>();
}
