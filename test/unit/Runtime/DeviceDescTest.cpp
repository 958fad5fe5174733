#include "mtsched/Runtime/DeviceDesc.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace mtsched;

namespace {

const char *GoodJSON = R"({
  "name": "test-gpu",
  "hbm_gbps": 2000,
  "peak_bf16_tflops": 312,
  "peak_fp32_tflops": 19.5,
  "link_gbps": 300,
  "link_latency_us": 0.8,
  "launch_us": 3,
  "barrier_us": 4,
  "num_sms": 108,
  "l2_mb": 40
})";

/// A device file in a fresh temporary directory, removed at the end.
class DeviceFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("mtsched-device-test", Dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(Dir); }

  std::string write(llvm::StringRef Name, llvm::StringRef Text) {
    llvm::SmallString<128> Path(Dir);
    llvm::sys::path::append(Path, Name);
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    EXPECT_FALSE(EC);
    OS << Text;
    return std::string(Path);
  }

  /// The error loading Text gives, with the file's path replaced by FILE.
  std::string errorFor(llvm::StringRef Text) {
    std::string Path = write("dev.json", Text);
    llvm::Expected<DeviceDesc> D = loadDeviceFile(Path);
    if (D)
      return "no error";
    std::string Msg = toString(D.takeError());
    size_t At = Msg.find(Path);
    EXPECT_EQ(At, 0u) << Msg;
    if (At == 0)
      Msg.replace(0, Path.size(), "FILE");
    return Msg;
  }

  /// GoodJSON with Key set to V.
  static std::string with(llvm::StringRef Key, llvm::json::Value V) {
    return edit([&](llvm::json::Object &O) { O[Key] = std::move(V); });
  }
  /// GoodJSON without Key.
  static std::string without(llvm::StringRef Key) {
    return edit([&](llvm::json::Object &O) { O.erase(Key); });
  }
  static std::string edit(llvm::function_ref<void(llvm::json::Object &)> F) {
    llvm::json::Value Good = cantFail(llvm::json::parse(GoodJSON));
    F(*Good.getAsObject());
    std::string Out;
    llvm::raw_string_ostream OS(Out);
    OS << Good;
    return OS.str();
  }

  llvm::SmallString<128> Dir;
};

TEST_F(DeviceFileTest, LoadsEveryKey) {
  llvm::Expected<DeviceDesc> D = loadDeviceFile(write("a.json", GoodJSON));
  ASSERT_TRUE(bool(D)) << toString(D.takeError());
  EXPECT_EQ(D->Name, "test-gpu");
  EXPECT_EQ(D->HbmGBps, 2000);
  EXPECT_EQ(D->PeakBf16Tflops, 312);
  EXPECT_EQ(D->PeakFp32Tflops, 19.5);
  EXPECT_EQ(D->LinkGBps, 300);
  EXPECT_EQ(D->LinkLatencyUs, 0.8);
  EXPECT_EQ(D->LaunchUs, 3);
  EXPECT_EQ(D->BarrierUs, 4);
  EXPECT_EQ(D->NumSMs, 108);
  EXPECT_EQ(D->L2MB, 40);
}

TEST_F(DeviceFileTest, MissingKeyIsNamed) {
  EXPECT_EQ(errorFor(without("link_gbps")), "FILE: missing key 'link_gbps'");
  EXPECT_EQ(errorFor(without("name")), "FILE: missing key 'name'");
  EXPECT_EQ(errorFor(without("num_sms")), "FILE: missing key 'num_sms'");
  EXPECT_EQ(errorFor(without("l2_mb")), "FILE: missing key 'l2_mb'");
}

TEST_F(DeviceFileTest, BadTypeIsNamed) {
  EXPECT_EQ(errorFor(with("hbm_gbps", "fast")),
            "FILE: key 'hbm_gbps' must be a number");
  EXPECT_EQ(errorFor(with("name", 7)), "FILE: key 'name' must be a string");
  EXPECT_EQ(errorFor(with("num_sms", 13.5)),
            "FILE: key 'num_sms' must be an integer");
  EXPECT_EQ(errorFor(with("launch_us", nullptr)),
            "FILE: key 'launch_us' must be a number");
}

TEST_F(DeviceFileTest, NonPositiveValueIsNamed) {
  EXPECT_EQ(errorFor(with("barrier_us", -1.5)),
            "FILE: key 'barrier_us' must be positive, got -1.5");
  EXPECT_EQ(errorFor(with("peak_fp32_tflops", 0)),
            "FILE: key 'peak_fp32_tflops' must be positive, got 0");
  EXPECT_EQ(errorFor(with("num_sms", -4)),
            "FILE: key 'num_sms' must be positive, got -4");
  EXPECT_EQ(errorFor(with("name", "")), "FILE: key 'name' must not be empty");
}

TEST_F(DeviceFileTest, UnknownKeyIsNamed) {
  EXPECT_EQ(errorFor(with("hbm_gbs", 1)), "FILE: unknown key 'hbm_gbs'");
}

TEST_F(DeviceFileTest, BadJSONGivesParserMessage) {
  std::string Msg = errorFor("{\"name\": \"x\",\n  \"hbm_gbps\" 5}");
  EXPECT_EQ(llvm::StringRef(Msg).find("FILE: invalid JSON: "), 0u) << Msg;
  // llvm::json reports the line and column of the problem.
  EXPECT_NE(Msg.find("[2:"), std::string::npos) << Msg;
  EXPECT_EQ(errorFor("[1, 2]"), "FILE: a device file must hold a JSON object");
}

TEST_F(DeviceFileTest, MissingFile) {
  llvm::SmallString<128> Path(Dir);
  llvm::sys::path::append(Path, "nope.json");
  llvm::Expected<DeviceDesc> D = loadDeviceFile(Path);
  ASSERT_FALSE(bool(D));
  std::string Msg = toString(D.takeError());
  EXPECT_EQ(Msg.find((Path + ": cannot read device file: ").str()), 0u) << Msg;
}

TEST_F(DeviceFileTest, WriteThenLoadRoundTrips) {
  for (llvm::StringRef Name : builtinDeviceNames()) {
    DeviceDesc D = cantFail(getBuiltinDevice(Name));
    D.LinkLatencyUs = 0.1; // Not exactly representable in binary.
    std::string Text;
    llvm::raw_string_ostream OS(Text);
    writeDeviceFile(D, OS);
    llvm::Expected<DeviceDesc> Back =
        loadDeviceFile(write((Name + ".json").str(), OS.str()));
    ASSERT_TRUE(bool(Back)) << toString(Back.takeError()) << "\n" << Text;
    EXPECT_EQ(Back->Name, D.Name);
    EXPECT_EQ(Back->LinkLatencyUs, D.LinkLatencyUs);
    EXPECT_EQ(hashDevice(*Back), hashDevice(D)) << Text;
  }
}

TEST(DeviceDescTest, BuiltinDevices) {
  llvm::Expected<DeviceDesc> H200 = getBuiltinDevice("h200");
  ASSERT_TRUE(bool(H200));
  EXPECT_EQ(H200->Name, "h200");
  EXPECT_EQ(H200->HbmGBps, 4800);
  EXPECT_EQ(H200->PeakBf16Tflops, 989);
  EXPECT_EQ(H200->LinkGBps, 450);
  EXPECT_EQ(H200->NumSMs, 132);

  llvm::Expected<DeviceDesc> H100 = getBuiltinDevice("H100");
  ASSERT_TRUE(bool(H100));
  EXPECT_EQ(H100->Name, "h100");
  EXPECT_EQ(H100->HbmGBps, 3350);
  EXPECT_EQ(H100->NumSMs, 132);

  // A default-constructed description is the H200, field for field.
  EXPECT_EQ(hashDevice(DeviceDesc()), hashDevice(*H200));
}

TEST(DeviceDescTest, UnknownBuiltinListsKnownOnes) {
  llvm::Expected<DeviceDesc> D = getBuiltinDevice("a100");
  ASSERT_FALSE(bool(D));
  EXPECT_EQ(toString(D.takeError()),
            "unknown device 'a100' (built-in devices: h100, h200; or give a "
            ".json device file)");
}

TEST(DeviceDescTest, HashSeesEveryField) {
  DeviceDesc Base;
  uint64_t H = hashDevice(Base);
  EXPECT_EQ(H, hashDevice(DeviceDesc()));
  auto Differs = [&](void (*Change)(DeviceDesc &)) {
    DeviceDesc D;
    Change(D);
    return hashDevice(D) != H;
  };
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.Name = "h200x"; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.HbmGBps += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.PeakBf16Tflops += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.PeakFp32Tflops += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.LinkGBps += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.LinkLatencyUs += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.LaunchUs += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.BarrierUs += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.NumSMs += 1; }));
  EXPECT_TRUE(Differs([](DeviceDesc &D) { D.L2MB += 1; }));
  EXPECT_NE(hashDevice(cantFail(getBuiltinDevice("h100"))), H);
}

TEST(DeviceDescTest, HashIsStable) {
  // Cache keys depend on these values: the serialisation is byte-exact and
  // platform-independent, so they only change when a built-in changes.
  EXPECT_EQ(hashDevice(cantFail(getBuiltinDevice("h200"))),
            0xb693e45dee6d37eaULL);
  EXPECT_EQ(hashDevice(cantFail(getBuiltinDevice("h100"))),
            0xb95572b9b1047662ULL);
}

} // namespace
