//===- ElementTypes.cpp - How the interpreter holds each dtype -----------===//
//
// The interpreter's element types: fp values rounded to bf16, f16, fp8 as
// the GPU rounds them, integers held exactly and wrapped at their width, and
// the conversions between HostValues of either kind.
//
//===----------------------------------------------------------------------===//
#include "InterpreterImpl.h"
#include "mtsched/Reference/Interpreter.h"
#include "mtsched/Reference/OpUnitReference.h"
#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mtsched;

uint16_t mtsched::floatToBF16(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  if ((U & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;
  U += 0x7fffu + ((U >> 16) & 1u);
  return uint16_t(U >> 16);
}

float mtsched::bf16ToFloat(uint16_t H) {
  uint32_t U = uint32_t(H) << 16;
  float F;
  std::memcpy(&F, &U, 4);
  return F;
}

uint16_t mtsched::floatToF16(float F) {
  uint32_t U;
  std::memcpy(&U, &F, 4);
  uint32_t Sign = (U >> 16) & 0x8000u;
  int32_t Exp = int32_t((U >> 23) & 0xff) - 127 + 15;
  uint32_t Man = U & 0x7fffffu;
  if (((U >> 23) & 0xff) == 0xff)
    return uint16_t(Sign | 0x7c00u | (Man ? 0x200u : 0));
  if (Exp >= 31)
    return uint16_t(Sign | 0x7c00u);
  if (Exp <= 0) {
    if (Exp < -10)
      return uint16_t(Sign);
    Man |= 0x800000u;
    uint32_t Shift = uint32_t(14 - Exp);
    uint32_t H = Man >> Shift;
    uint32_t Rem = Man & ((1u << Shift) - 1), Half = 1u << (Shift - 1);
    if (Rem > Half || (Rem == Half && (H & 1)))
      ++H;
    return uint16_t(Sign | H);
  }
  uint32_t H = Sign | (uint32_t(Exp) << 10) | (Man >> 13);
  uint32_t Rem = Man & 0x1fffu;
  if (Rem > 0x1000u || (Rem == 0x1000u && (H & 1)))
    ++H;
  return uint16_t(H);
}

float mtsched::f16ToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000u) << 16;
  uint32_t Exp = (H >> 10) & 0x1f, Man = H & 0x3ffu;
  float F;
  if (Exp == 0) {
    F = std::ldexp(float(Man), -24);
    return Sign ? -F : F;
  }
  uint32_t U = Exp == 31 ? (Sign | 0x7f800000u | (Man << 13))
                         : (Sign | ((Exp - 15 + 127) << 23) | (Man << 13));
  std::memcpy(&F, &U, 4);
  return F;
}

namespace {
/// The layout of an fp8 format: mantissa bits, exponent bias, the code of
/// the largest finite value and a NaN code (sign bit clear).
struct F8Format {
  int ManBits, Bias;
  uint8_t MaxCode, NanCode;
  double MaxValue;
};
} // namespace

static F8Format f8Format(DType T) {
  if (T == DType::F8E5M2)
    return {2, 15, 0x7b, 0x7e, 57344.0};
  return {3, 7, 0x7e, 0x7f, 448.0};
}

// The generated kernels' mt_f32_to_f8 (CudaCodegen.cpp's prelude) is this
// same computation in float, so both sides round alike.
uint8_t mtsched::floatToF8(float F, DType T) {
  F8Format Fmt = f8Format(T);
  uint8_t Sign = std::signbit(F) ? 0x80 : 0;
  double A = std::fabs(double(F));
  if (std::isnan(A))
    return Sign | Fmt.NanCode;
  if (A >= Fmt.MaxValue)
    return Sign | Fmt.MaxCode;
  unsigned Code;
  if (A < std::ldexp(1.0, 1 - Fmt.Bias)) {
    // Subnormal quanta; rounding up to 2^ManBits is the smallest normal.
    Code = unsigned(std::nearbyint(std::ldexp(A, Fmt.Bias - 1 + Fmt.ManBits)));
  } else {
    int E;
    std::frexp(A, &E);
    E -= 1; // A in [2^E, 2^(E+1))
    unsigned M = unsigned(std::nearbyint(std::ldexp(A, Fmt.ManBits - E)));
    // M == 2^(ManBits+1) carries into the exponent by itself.
    Code = (unsigned(E + Fmt.Bias) << Fmt.ManBits) + M - (1u << Fmt.ManBits);
  }
  return Sign | uint8_t(std::min<unsigned>(Code, Fmt.MaxCode));
}

float mtsched::f8ToFloat(uint8_t B, DType T) {
  F8Format Fmt = f8Format(T);
  unsigned Em = B & 0x7fu, E = Em >> Fmt.ManBits,
           M = Em & ((1u << Fmt.ManBits) - 1);
  double V;
  if (T == DType::F8E4M3 ? Em == 0x7fu : E == 31u)
    V = T == DType::F8E5M2 && M == 0 ? HUGE_VAL : NAN;
  else if (E == 0)
    V = std::ldexp(double(M), 1 - Fmt.Bias - Fmt.ManBits);
  else
    V = std::ldexp(double(M | (1u << Fmt.ManBits)),
                   int(E) - Fmt.Bias - Fmt.ManBits);
  return float((B & 0x80) ? -V : V);
}

double mtsched::roundTo(double D, DType T) {
  switch (T) {
  case DType::F32:
    return double(float(D));
  case DType::BF16:
    return bf16ToFloat(floatToBF16(float(D)));
  case DType::F16:
    return f16ToFloat(floatToF16(float(D)));
  case DType::F8E4M3:
  case DType::F8E5M2:
    return f8ToFloat(floatToF8(float(D), T), T);
  case DType::Bool:
    return D != 0; // NaN is true, as in PyTorch
  default:
    return std::nearbyint(D);
  }
}

HostValues HostValues::zeros(DType T, size_t N) {
  if (isFloatDType(T))
    return HostValues(std::vector<double>(N));
  return HostValues(std::vector<int64_t>(N));
}

std::vector<double> HostValues::toDoubles() const {
  if (!IsInt)
    return F;
  return std::vector<double>(I.begin(), I.end());
}

int64_t mtsched::wrapInt(int64_t V, DType T) {
  // A bool is held as the integer 0 or 1.
  if (T == DType::Bool)
    return V != 0;
  if (T == DType::I32)
    return int64_t(int32_t(uint32_t(uint64_t(V))));
  return V;
}

int64_t mtsched::doubleToInt(double D, DType T) {
  // Any non-zero value is true, NaN too, as in PyTorch.
  if (T == DType::Bool)
    return D != 0;
  if (!std::isfinite(D))
    return 0;
  // Truncated, every finite double is an integer; fmod reduces its
  // magnitude exactly below 2^64, and the sign is applied modulo 2^64.
  double M = std::fmod(std::fabs(std::trunc(D)), 18446744073709551616.0);
  uint64_t U = uint64_t(M);
  if (D < 0)
    U = 0 - U;
  return wrapInt(int64_t(U), T);
}

/// Two's-complement arithmetic on int64_t without signed overflow (which
/// C++ leaves undefined): through uint64_t, then wrapped to T's width.
int64_t mtsched::addWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) + uint64_t(B)), T);
}
int64_t mtsched::subWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) - uint64_t(B)), T);
}
int64_t mtsched::mulWrap(int64_t A, int64_t B, DType T) {
  return wrapInt(int64_t(uint64_t(A) * uint64_t(B)), T);
}

HostValues mtsched::fromDoubles(std::vector<double> F, DType T) {
  if (isFloatDType(T))
    return HostValues(std::move(F));
  std::vector<int64_t> I(F.size());
  for (size_t K = 0; K < F.size(); ++K)
    I[K] = doubleToInt(F[K], T);
  return HostValues(std::move(I));
}

void mtsched::copyElement(HostValues &To, size_t I, const HostValues &From,
                          size_t J, DType T) {
  if (To.isInt())
    To.ints()[I] = From.isInt() ? wrapInt(From.ints()[J], T)
                                : doubleToInt(From.floats()[J], T);
  else
    To.floats()[I] = From.getDouble(J);
}

int64_t mtsched::intAt(const HostValues &V, size_t I) {
  return V.isInt() ? V.ints()[I] : doubleToInt(V.floats()[I], DType::I64);
}
