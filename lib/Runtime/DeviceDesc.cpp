//===- DeviceDesc.cpp - Built-in devices and device files -----------------===//
#include "mtsched/Runtime/DeviceDesc.h"
#include "mtsched/Support/FileIO.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include <cmath>
#include <cstring>

using namespace mtsched;

namespace {

const DeviceField NumericFields[] = {
    {"hbm_gbps", &DeviceDesc::HbmGBps},
    {"peak_bf16_tflops", &DeviceDesc::PeakBf16Tflops},
    {"peak_fp32_tflops", &DeviceDesc::PeakFp32Tflops},
    {"link_gbps", &DeviceDesc::LinkGBps},
    {"link_latency_us", &DeviceDesc::LinkLatencyUs},
    {"launch_us", &DeviceDesc::LaunchUs},
    {"barrier_us", &DeviceDesc::BarrierUs},
};
/// Added after device files existed: optional, so older files still read.
const DeviceField NetworkFields[] = {
    {"net_gbps", &DeviceDesc::NetGBps},
    {"net_latency_us", &DeviceDesc::NetLatencyUs},
};
constexpr llvm::StringLiteral NumSMsKey = "num_sms";
constexpr llvm::StringLiteral L2Key = "l2_mb";
constexpr llvm::StringLiteral NameKey = "name";

DeviceDesc h200() {
  // The struct's defaults are the H200 (SXM, 141 GB): 4.8 TB/s HBM3e, the
  // same compute as the H100 SXM (989 dense bf16 TFLOP/s, 67 fp32), NVLink4
  // at 450 GB/s per direction, 132 SMs, 50 MB L2. The latencies are
  // calibrated against ANCHORS.md (see docs/SIMULATOR.md).
  return DeviceDesc();
}

DeviceDesc h100() {
  // H100 SXM (80 GB): only the HBM3 bandwidth differs from the H200; the
  // chip, its links and so its fixed costs are the same.
  DeviceDesc D;
  D.Name = "h100";
  D.HbmGBps = 3350;
  return D;
}

llvm::Error fileError(llvm::StringRef Path, const llvm::Twine &Msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Path + ": " + Msg);
}

std::string formatNumber(double V) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << llvm::json::Value(V);
  return OS.str();
}

llvm::Error readPositive(const llvm::json::Object &Root, llvm::StringRef Key,
                         llvm::StringRef Path, double &Out) {
  const llvm::json::Value *V = Root.get(Key);
  if (!V)
    return fileError(Path, "missing key '" + Key + "'");
  std::optional<double> D = V->getAsNumber();
  if (!D)
    return fileError(Path, "key '" + Key + "' must be a number");
  if (!(*D > 0) || !std::isfinite(*D))
    return fileError(Path, "key '" + Key + "' must be positive, got " +
                               formatNumber(*D));
  Out = *D;
  return llvm::Error::success();
}

} // namespace

std::vector<llvm::StringRef> mtsched::builtinDeviceNames() {
  return {"h100", "h200"};
}

llvm::Expected<DeviceDesc> mtsched::getBuiltinDevice(llvm::StringRef Name) {
  std::string Lower = Name.lower();
  if (Lower == "h100")
    return h100();
  if (Lower == "h200")
    return h200();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "unknown device '" + Name +
          "' (built-in devices: " + llvm::join(builtinDeviceNames(), ", ") +
          "; or give a .json device file)");
}

llvm::Expected<DeviceDesc> mtsched::parseDeviceJSON(llvm::StringRef Text,
                                                    llvm::StringRef Path) {
  llvm::Expected<llvm::json::Value> Parsed = llvm::json::parse(Text);
  if (!Parsed)
    return fileError(Path, "invalid JSON: " + toString(Parsed.takeError()));
  const llvm::json::Object *Root = Parsed->getAsObject();
  if (!Root)
    return fileError(Path, "a device file must hold a JSON object");

  // Unknown keys are most likely misspelt known ones; silently ignoring them
  // would simulate a different machine than the user described.
  for (const auto &KV : *Root) {
    llvm::StringRef Key = KV.first;
    bool Known =
        Key == NameKey || Key == NumSMsKey || Key == L2Key ||
        llvm::any_of(NumericFields,
                     [&](const DeviceField &F) { return F.Key == Key; }) ||
        llvm::any_of(NetworkFields,
                     [&](const DeviceField &F) { return F.Key == Key; });
    if (!Known)
      return fileError(Path, "unknown key '" + Key + "'");
  }

  DeviceDesc D;
  const llvm::json::Value *Name = Root->get(NameKey);
  if (!Name)
    return fileError(Path, "missing key 'name'");
  std::optional<llvm::StringRef> NameStr = Name->getAsString();
  if (!NameStr)
    return fileError(Path, "key 'name' must be a string");
  if (NameStr->empty())
    return fileError(Path, "key 'name' must not be empty");
  D.Name = NameStr->str();

  for (const DeviceField &F : NumericFields)
    if (llvm::Error E = readPositive(*Root, F.Key, Path, D.*F.Member))
      return std::move(E);
  for (const DeviceField &F : NetworkFields)
    if (Root->get(F.Key))
      if (llvm::Error E = readPositive(*Root, F.Key, Path, D.*F.Member))
        return std::move(E);

  const llvm::json::Value *SMs = Root->get(NumSMsKey);
  if (!SMs)
    return fileError(Path, "missing key 'num_sms'");
  std::optional<int64_t> NumSMs = SMs->getAsInteger();
  if (!NumSMs)
    return fileError(Path, "key 'num_sms' must be an integer");
  if (*NumSMs <= 0 || *NumSMs > 1000000)
    return fileError(Path, "key 'num_sms' must be positive, got " +
                               llvm::Twine(*NumSMs));
  D.NumSMs = static_cast<int>(*NumSMs);

  if (llvm::Error E = readPositive(*Root, L2Key, Path, D.L2MB))
    return std::move(E);
  return D;
}

llvm::Expected<DeviceDesc> mtsched::loadDeviceFile(llvm::StringRef Path) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> Buf =
      readBoundedFile(Path, MaxConfigFileBytes, "a device file");
  if (!Buf)
    return fileError(Path, "cannot read device file: " +
                               llvm::toString(Buf.takeError()));
  return parseDeviceJSON((*Buf)->getBuffer(), Path);
}

void mtsched::writeDeviceFile(const DeviceDesc &D, llvm::raw_ostream &OS) {
  llvm::json::OStream J(OS, /*IndentSize=*/2);
  J.object([&] {
    J.attribute(NameKey, D.Name);
    for (const DeviceField &F : NumericFields)
      J.attribute(F.Key, D.*F.Member);
    J.attribute(NumSMsKey, int64_t(D.NumSMs));
    J.attribute(L2Key, D.L2MB);
    for (const DeviceField &F : NetworkFields)
      J.attribute(F.Key, D.*F.Member);
  });
  OS << '\n';
}

uint64_t mtsched::hashDevice(const DeviceDesc &D) {
  // Raw little-endian bit patterns rather than printed numbers: no libc's
  // float formatting or locale can change a cache key.
  std::string Bytes = "mtsched-device-v1";
  Bytes.push_back('\0');
  auto AddU64 = [&](uint64_t V) {
    char Buf[8];
    llvm::support::endian::write64le(Buf, V);
    Bytes.append(Buf, 8);
  };
  AddU64(D.Name.size());
  Bytes += D.Name;
  for (const DeviceField &F : NumericFields) {
    // -0.0 and 0.0 describe the same device.
    double V = D.*F.Member == 0 ? 0.0 : D.*F.Member;
    uint64_t Bits;
    std::memcpy(&Bits, &V, sizeof(Bits));
    AddU64(Bits);
  }
  AddU64(static_cast<uint64_t>(int64_t(D.NumSMs)));
  double L2 = D.L2MB == 0 ? 0.0 : D.L2MB;
  uint64_t Bits;
  std::memcpy(&Bits, &L2, sizeof(Bits));
  AddU64(Bits);
  // The network fields join the hash only where they differ from the
  // defaults, so cache keys made before they existed stay valid.
  const DeviceDesc Defaults;
  for (const DeviceField &F : NetworkFields)
    if (D.*F.Member != Defaults.*F.Member) {
      Bytes += F.Key;
      std::memcpy(&Bits, &(D.*F.Member), sizeof(Bits));
      AddU64(Bits);
    }
  return llvm::xxHash64(Bytes);
}

llvm::ArrayRef<DeviceField> mtsched::deviceNumericFields() {
  return NumericFields;
}

llvm::ArrayRef<DeviceField> mtsched::deviceNetworkFields() {
  return NetworkFields;
}
