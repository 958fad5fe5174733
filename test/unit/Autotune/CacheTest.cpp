#include "mtsched/Autotune/Cache.h"
#include "mtsched/IR/Graph.h"
#include "mtsched/IR/Parser.h"
#include "mtsched/Lowering/Lowering.h"
#include "mtsched/Schedule/Fusion.h"
#include "mtsched/Support/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "gtest/gtest.h"
#include <cmath>
#include <limits>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace mtsched;

namespace {

class CacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mtsched-cache", Dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(Dir); }
  llvm::SmallString<128> Dir;
};

CacheEntry sampleEntry() {
  CacheEntry E;
  E.Records["a"] = {ChoiceStatus::Ok, 1.0 / 3.0, ""};
  E.Records["b"] = {ChoiceStatus::Failed,
                    std::numeric_limits<double>::infinity(), "no model"};
  E.Records["c"] = {ChoiceStatus::Ok, 12345.678, ""};
  return E;
}

TEST_F(CacheTest, RoundTripsExactly) {
  AutotuneCache C(std::string(Dir.str()));
  EXPECT_EQ(C.lookup("k1").State, AutotuneCache::LookupState::Miss);
  ASSERT_FALSE(llvm::errorToBool(C.store("k1", sampleEntry())));
  AutotuneCache::LookupResult R = C.lookup("k1");
  ASSERT_EQ(R.State, AutotuneCache::LookupState::Hit) << R.Problem;
  EXPECT_EQ(R.Entry.Records.at("a").Us, 1.0 / 3.0);
  EXPECT_TRUE(std::isinf(R.Entry.Records.at("b").Us));
  EXPECT_EQ(R.Entry.Records.at("b").Status, ChoiceStatus::Failed);
  EXPECT_EQ(R.Entry.Records.at("b").Message, "no model");
  EXPECT_EQ(R.Entry.Records.at("c").Us, 12345.678);
  // Another key is a miss, even if it shared the file name.
  EXPECT_EQ(C.lookup("k2").State, AutotuneCache::LookupState::Miss);
  llvm::Expected<CacheEntry> Other =
      CacheEntry::parse(sampleEntry().serialize("k1"), "k2");
  ASSERT_FALSE(Other);
  EXPECT_EQ(llvm::toString(Other.takeError()), "written for another key");
}

TEST_F(CacheTest, DamagedFilesAreInvalid) {
  AutotuneCache C(std::string(Dir.str()));
  ASSERT_FALSE(llvm::errorToBool(C.store("k", sampleEntry())));
  std::string Path = C.pathFor("k");
  auto Buf = llvm::MemoryBuffer::getFile(Path);
  ASSERT_TRUE(bool(Buf));
  std::string Good = (*Buf)->getBuffer().str();
  auto Write = [&](llvm::StringRef Text) {
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    OS << Text;
  };
  struct Case {
    std::string Text;
    const char *Problem;
  };
  std::string Flipped = Good;
  Flipped[Flipped.size() - 5] ^= 1;
  std::vector<Case> Cases = {
      {Good.substr(0, Good.size() - 10), "truncated"},
      {Flipped, "checksum mismatch"},
      {"mtsched-autotune-cache 2\n" + Good.substr(Good.find('\n') + 1),
       "cache format 2"},
      {"", "bad header"},
  };
  for (const Case &K : Cases) {
    Write(K.Text);
    AutotuneCache::LookupResult R = C.lookup("k");
    EXPECT_EQ(R.State, AutotuneCache::LookupState::Invalid) << K.Problem;
    EXPECT_NE(R.Problem.find(K.Problem), std::string::npos) << R.Problem;
  }
  // Rewriting repairs it.
  ASSERT_FALSE(llvm::errorToBool(C.store("k", sampleEntry())));
  EXPECT_EQ(C.lookup("k").State, AutotuneCache::LookupState::Hit);
}

TEST_F(CacheTest, SpecialAndHugeFilesAreRefusedUnread) {
  AutotuneCache C(std::string(Dir.str()));
  ASSERT_FALSE(llvm::errorToBool(C.store("k", sampleEntry())));
  std::string Path = C.pathFor("k");
  // A FIFO with no writer: a blocking open would wait forever.
  ASSERT_FALSE(llvm::sys::fs::remove(Path));
  ASSERT_EQ(::mkfifo(Path.c_str(), 0600), 0);
  AutotuneCache::LookupResult R = C.lookup("k");
  EXPECT_EQ(R.State, AutotuneCache::LookupState::Invalid);
  EXPECT_EQ(R.Problem, "not a regular file");
  // A device that never ends. (sys::fs::remove refuses a FIFO.)
  ASSERT_EQ(::unlink(Path.c_str()), 0);
  ASSERT_FALSE(llvm::sys::fs::create_link("/dev/zero", Path));
  R = C.lookup("k");
  EXPECT_EQ(R.State, AutotuneCache::LookupState::Invalid);
  EXPECT_EQ(R.Problem, "not a regular file");
  // A file larger than any entry: refused by its size (it is sparse, so
  // this costs no disk).
  ASSERT_FALSE(llvm::sys::fs::remove(Path));
  {
    int FD;
    ASSERT_FALSE(llvm::sys::fs::openFileForWrite(Path, FD));
    ASSERT_EQ(::ftruncate(FD, AutotuneCache::MaxEntryBytes + 1), 0);
    ::close(FD);
  }
  R = C.lookup("k");
  EXPECT_EQ(R.State, AutotuneCache::LookupState::Invalid);
  EXPECT_NE(R.Problem.find("larger than"), std::string::npos) << R.Problem;
  // Storing replaces each of them with a good entry.
  ASSERT_FALSE(llvm::errorToBool(C.store("k", sampleEntry())));
  EXPECT_EQ(C.lookup("k").State, AutotuneCache::LookupState::Hit);
}

TEST(CacheEntryTest, ImpossibleTimesAreRejected) {
  // The checksum only proves the bytes are the ones written; these could
  // still have been written by hand.
  CacheEntry Neg;
  Neg.Records["a"] = {ChoiceStatus::Ok, -1.0, ""};
  llvm::Expected<CacheEntry> E = CacheEntry::parse(Neg.serialize("k"), "k");
  ASSERT_FALSE(E);
  EXPECT_EQ(llvm::toString(E.takeError()), "record 'a' has a negative time");
  // Infinity cannot be written in JSON; a number too large for a double
  // reads as one, and an ok record must have a finite time.
  std::string Huge = sampleEntry().serialize("k");
  Huge.replace(Huge.find("12345.678"), 9, "1e999");
  E = CacheEntry::parse(Huge, "k");
  ASSERT_FALSE(E);
  EXPECT_EQ(llvm::toString(E.takeError()),
            "a record's status and time disagree");
}

TEST_F(CacheTest, ConcurrentWritersNeverExposeAPartialEntry) {
  // Several writers (as if several processes shared the directory) and a
  // reader: every lookup is a miss or a complete hit, never invalid.
  AutotuneCache C(std::string(Dir.str()));
  CacheEntry Big;
  for (int I = 0; I < 2000; ++I)
    Big.Records["m" + std::to_string(I)] = {ChoiceStatus::Ok, double(I), ""};
  std::vector<std::thread> Writers;
  for (int W = 0; W < 4; ++W)
    Writers.emplace_back([&] {
      for (int I = 0; I < 20; ++I)
        EXPECT_FALSE(llvm::errorToBool(C.store("shared", Big)));
    });
  for (int I = 0; I < 200; ++I) {
    AutotuneCache::LookupResult R = C.lookup("shared");
    ASSERT_NE(R.State, AutotuneCache::LookupState::Invalid) << R.Problem;
  }
  for (std::thread &T : Writers)
    T.join();
  EXPECT_EQ(C.lookup("shared").State, AutotuneCache::LookupState::Hit);
  std::error_code EC;
  int Files = 0;
  for (llvm::sys::fs::directory_iterator It(Dir + "/autotune", EC), End;
       It != End && !EC; It.increment(EC))
    ++Files;
  EXPECT_EQ(Files, 1) << "temporary files left behind";
}

/// The cache key of every multi-template buffer of a one-graph module.
std::vector<std::string> keysOf(llvm::StringRef IR, const AutotuneOptions &Opts,
                                int World = 2) {
  llvm::SourceMgr SM;
  SM.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(IR),
                        llvm::SMLoc());
  std::unique_ptr<Module> M = parseModule(SM);
  EXPECT_TRUE(M);
  if (!M)
    return {};
  Diagnostics Diags(SM);
  PassContext Ctx;
  Ctx.M = M.get();
  Ctx.Diags = &Diags;
  std::unique_ptr<Pass> Lower = createLowerPass(LoweringOptions());
  std::unique_ptr<Pass> Fuse = createFusePass(FusionOptions());
  Lower->setContext(Ctx);
  Fuse->setContext(Ctx);
  Graph &G = *M->getGraphs().front();
  EXPECT_FALSE(llvm::errorToBool(Lower->run(G)));
  EXPECT_FALSE(llvm::errorToBool(Fuse->run(G)));
  std::vector<std::string> Keys;
  for (const auto &N : G.getNodes())
    if (auto *T = llvm::dyn_cast<MultiTemplateBufferNode>(N.get()))
      Keys.push_back(cacheKeyOf(*M, G, *T, Opts, "sim", "v1", World));
  return Keys;
}

const char *Base = R"(group @tp = [0, 1]
graph @g(%x: bf16[64,256], %w: bf16[256,256], %b: bf16[256]) attributes {world_size = 2} {
  %h = matmul(%x, %w) : bf16[64,256]
  %r = all_reduce(%h) {reduce = "sum", group = "tp"} : bf16[64,256]
  %z = add(%r, %b) : bf16[64,256]
  return %z
}
)";

TEST(CacheKeyTest, CoversWhatChangesMeasurements) {
  AutotuneOptions Opts;
  std::vector<std::string> K = keysOf(Base, Opts);
  ASSERT_EQ(K.size(), 2u);
  EXPECT_EQ(K, keysOf(Base, Opts)) << "keys must be deterministic";
  auto Differs = [&](llvm::StringRef IR, const AutotuneOptions &O,
                     int World = 2) {
    std::vector<std::string> K2 = keysOf(IR, O, World);
    return K2.size() == 2 && K2[0] != K[0] && K2[1] != K[1];
  };
  std::string Shape = Base;
  for (size_t P; (P = Shape.find("64,")) != std::string::npos;)
    Shape.replace(P, 3, "32,");
  EXPECT_TRUE(Differs(Shape, Opts));
  std::string Dtype = Base;
  for (size_t P; (P = Dtype.find("bf16")) != std::string::npos;)
    Dtype.replace(P, 4, "f16");
  EXPECT_TRUE(Differs(Dtype, Opts));
  AutotuneOptions Dev = Opts;
  Dev.Device.HbmGBps += 1;
  EXPECT_TRUE(Differs(Base, Dev));
  EXPECT_TRUE(Differs(Base, Opts, /*World=*/4));
  AutotuneOptions Noise = Opts;
  Noise.SimNoisePct = 2;
  EXPECT_TRUE(Differs(Base, Noise));
  // The epilogue's signature is part of the collective's key only.
  std::string Epi = Base;
  Epi.replace(Epi.find("add(%r, %b)"), 11, "mul(%r, %b)");
  std::vector<std::string> KE = keysOf(Epi, Opts);
  ASSERT_EQ(KE.size(), 2u);
  EXPECT_EQ(KE[0], K[0]);
  EXPECT_NE(KE[1], K[1]);
  // The size hints are not: each measurement is keyed inside the entry by
  // the workload at its hint (rows of a matmul, bytes of a collective).
  AutotuneOptions Hints = Opts;
  Hints.SizeHintsM = {16};
  Hints.SizeHintsBytes = {4096};
  EXPECT_EQ(keysOf(Base, Hints), K);
}

} // namespace
