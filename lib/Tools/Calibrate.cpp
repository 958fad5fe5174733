//===- Calibrate.cpp - Fit the simulator's device to measured times -------===//
#include "mtsched/Tools/Calibrate.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <map>

using namespace mtsched;

namespace {
// The fitted parameters are the device description's numeric fields.
const llvm::ArrayRef<DeviceField> Params = deviceNumericFields();
const size_t NumParams = Params.size();
} // namespace

std::vector<std::string> mtsched::calibratedParameterNames() {
  std::vector<std::string> Out;
  for (const DeviceField &P : Params)
    Out.push_back(P.Key.str());
  return Out;
}

double mtsched::predictSampleUs(const DeviceDesc &D,
                                const CalibrationSample &S) {
  switch (S.K) {
  case CalibrationSample::Kind::Choice:
    return predictChoiceUs(D, S.W, S.C, false);
  case CalibrationSample::Kind::Fused:
    return predictChoiceUs(D, S.W, S.C, true);
  case CalibrationSample::Kind::Epilogue:
    return predictEpilogueUs(D, S.W);
  }
  return 0;
}

namespace {

/// Mean squared relative error of the samples on a device whose fitted
/// parameters are Start's times exp(X).
class Objective {
public:
  Objective(const DeviceDesc &Start,
            const std::vector<CalibrationSample> &Samples,
            const std::vector<size_t> &Free)
      : Start(Start), Samples(Samples), Free(Free) {}

  DeviceDesc device(const std::vector<double> &X) const {
    DeviceDesc D = Start;
    for (size_t I = 0; I < Free.size(); ++I)
      D.*Params[Free[I]].Member =
          Start.*Params[Free[I]].Member * std::exp(X[I]);
    return D;
  }
  double operator()(const std::vector<double> &X) {
    ++Evaluations;
    DeviceDesc D = device(X);
    double Sum = 0;
    for (const CalibrationSample &S : Samples) {
      double P = predictSampleUs(D, S);
      double E = std::isfinite(P) ? (P - S.MeasuredUs) / S.MeasuredUs : 10.0;
      Sum += E * E;
    }
    return Sum / Samples.size();
  }
  unsigned Evaluations = 0;

private:
  const DeviceDesc &Start;
  const std::vector<CalibrationSample> &Samples;
  const std::vector<size_t> &Free;
};

/// Nelder-Mead from X0 with initial step Step; returns the best point.
std::vector<double> nelderMead(Objective &F, std::vector<double> X0,
                               double Step, unsigned MaxIter) {
  size_t N = X0.size();
  std::vector<std::vector<double>> P(N + 1, X0);
  for (size_t I = 0; I < N; ++I)
    P[I + 1][I] += Step;
  std::vector<double> V(N + 1);
  for (size_t I = 0; I <= N; ++I)
    V[I] = F(P[I]);
  for (unsigned It = 0; It < MaxIter; ++It) {
    std::vector<size_t> Order(N + 1);
    for (size_t I = 0; I <= N; ++I)
      Order[I] = I;
    std::sort(Order.begin(), Order.end(), [&](size_t A, size_t B) {
      return V[A] < V[B] || (V[A] == V[B] && A < B);
    });
    size_t Best = Order[0], Worst = Order[N], Second = Order[N - 1];
    if (V[Worst] - V[Best] <= 1e-14 * (1 + V[Best]))
      break;
    std::vector<double> C(N, 0);
    for (size_t I = 0; I <= N; ++I)
      if (I != Worst)
        for (size_t J = 0; J < N; ++J)
          C[J] += P[I][J] / N;
    auto Along = [&](double T) {
      std::vector<double> X(N);
      for (size_t J = 0; J < N; ++J)
        X[J] = C[J] + T * (P[Worst][J] - C[J]);
      return X;
    };
    std::vector<double> R = Along(-1);
    double FR = F(R);
    if (FR < V[Best]) {
      std::vector<double> E = Along(-2);
      double FE = F(E);
      if (FE < FR) {
        P[Worst] = E;
        V[Worst] = FE;
      } else {
        P[Worst] = R;
        V[Worst] = FR;
      }
    } else if (FR < V[Second]) {
      P[Worst] = R;
      V[Worst] = FR;
    } else {
      std::vector<double> K = FR < V[Worst] ? Along(-0.5) : Along(0.5);
      double FK = F(K);
      if (FK < std::min(FR, V[Worst])) {
        P[Worst] = K;
        V[Worst] = FK;
      } else {
        for (size_t I = 0; I <= N; ++I)
          if (I != Best) {
            for (size_t J = 0; J < N; ++J)
              P[I][J] = P[Best][J] + 0.5 * (P[I][J] - P[Best][J]);
            V[I] = F(P[I]);
          }
      }
    }
  }
  size_t Best = 0;
  for (size_t I = 1; I <= N; ++I)
    if (V[I] < V[Best])
      Best = I;
  return P[Best];
}

void errorsInto(const DeviceDesc &D,
                const std::vector<CalibrationSample> &Samples, bool After,
                std::map<std::string, CalibrationError> &Groups) {
  for (const CalibrationSample &S : Samples) {
    CalibrationError &G = Groups[S.Group];
    G.Group = S.Group;
    double P = predictSampleUs(D, S);
    double E =
        std::isfinite(P) ? std::fabs(P - S.MeasuredUs) / S.MeasuredUs : 1e9;
    double &Rms = After ? G.RmsAfter : G.RmsBefore;
    double &Max = After ? G.MaxAfter : G.MaxBefore;
    Rms += E * E;
    Max = std::max(Max, E);
    if (After)
      ++G.Count;
  }
}

} // namespace

CalibrationResult
mtsched::calibrateDevice(const DeviceDesc &Start,
                         const std::vector<CalibrationSample> &Samples,
                         llvm::StringRef Name) {
  CalibrationResult R;
  // A parameter is free when moving it by 20% moves some prediction by
  // more than 0.1%.
  std::vector<size_t> Free;
  for (size_t I = 0; I < NumParams; ++I) {
    DeviceDesc Up = Start;
    Up.*Params[I].Member *= 1.2;
    bool Moves = false;
    for (const CalibrationSample &S : Samples) {
      double A = predictSampleUs(Start, S), B = predictSampleUs(Up, S);
      if (std::isfinite(A) != std::isfinite(B) ||
          (std::isfinite(A) && std::fabs(B - A) > 1e-3 * A)) {
        Moves = true;
        break;
      }
    }
    if (Moves)
      Free.push_back(I);
    else
      R.Undetermined.push_back(Params[I].Key.str());
  }
  Objective F(Start, Samples, Free);
  std::vector<double> X(Free.size(), 0.0);
  R.ObjectiveBefore = F(X);
  double Best = R.ObjectiveBefore;
  // Restart from the best point with a shrinking simplex until a restart
  // stops improving: Nelder-Mead can stall on the roofline's kinks.
  double Step = 0.5;
  for (unsigned Round = 0; Round < 12 && !Free.empty(); ++Round) {
    std::vector<double> Y = nelderMead(F, X, Step, 3000);
    double FY = F(Y);
    bool Improved = FY < Best * (1 - 1e-9);
    if (FY < Best) {
      Best = FY;
      X = Y;
    }
    if (!Improved && Step < 0.02)
      break;
    Step = Improved ? std::max(Step * 0.5, 0.05) : Step * 0.3;
  }
  R.Fitted = F.device(X);
  R.Fitted.Name = Name.str();
  R.ObjectiveAfter = Best;
  R.Evaluations = F.Evaluations;

  std::map<std::string, CalibrationError> Groups;
  errorsInto(Start, Samples, false, Groups);
  errorsInto(R.Fitted, Samples, true, Groups);
  for (auto &KV : Groups) {
    CalibrationError E = KV.second;
    E.RmsBefore = std::sqrt(E.RmsBefore / E.Count);
    E.RmsAfter = std::sqrt(E.RmsAfter / E.Count);
    R.Errors.push_back(E);
  }
  return R;
}

void mtsched::printCalibration(const DeviceDesc &Start,
                               const CalibrationResult &R,
                               llvm::raw_ostream &OS) {
  OS << "parameter            start       fitted\n";
  for (const DeviceField &P : Params) {
    bool Fixed = llvm::is_contained(R.Undetermined, P.Key);
    OS << llvm::format("%-18s %10.4g %12.4g", P.Key.data(), Start.*P.Member,
                       R.Fitted.*P.Member)
       << (Fixed ? "  (not determined by these timings: kept)" : "") << '\n';
  }
  OS << llvm::format("%-18s %10d %12d  (kept)\n",
                     static_cast<const char *>("num_sms"), Start.NumSMs,
                     R.Fitted.NumSMs)
     << llvm::format("%-18s %10.4g %12.4g  (kept)\n",
                     static_cast<const char *>("l2_mb"), Start.L2MB,
                     R.Fitted.L2MB);
  OS << "\nrelative error per choice kind (rms / max, %):\n"
     << "kind                                samples   before            "
        "after\n";
  for (const CalibrationError &E : R.Errors)
    OS << llvm::format("%-35s %7u %7.2f / %7.2f %7.2f / %7.2f\n",
                       E.Group.c_str(), E.Count, 100 * E.RmsBefore,
                       100 * E.MaxBefore, 100 * E.RmsAfter, 100 * E.MaxAfter);
  OS << llvm::format("\nobjective (mean squared relative error): %.3g -> "
                     "%.3g after %u evaluations\n",
                     R.ObjectiveBefore, R.ObjectiveAfter, R.Evaluations);
}
