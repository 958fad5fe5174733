//===- FileIO.cpp - Bounded reads of input files, checked writes ----------===//
#include "mtsched/Support/FileIO.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Errc.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"
#include <cstring>

using namespace mtsched;

std::string mtsched::formatByteLimit(uint64_t Bytes) {
  if (Bytes >= (uint64_t(1) << 20) && Bytes % (uint64_t(1) << 20) == 0)
    return std::to_string(Bytes >> 20) + " MiB";
  if (Bytes >= 1024 && Bytes % 1024 == 0)
    return std::to_string(Bytes >> 10) + " KiB";
  return std::to_string(Bytes) + " bytes";
}

static llvm::Error tooLarge(uint64_t MaxBytes, llvm::StringRef What) {
  return llvm::createStringError(
      std::make_error_code(std::errc::file_too_large),
      "file too large: more than " + formatByteLimit(MaxBytes) +
          ", the limit for " + What);
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
mtsched::readBoundedFile(llvm::StringRef Path, uint64_t MaxBytes,
                         llvm::StringRef What) {
  bool Stdin = Path == "-";
  std::string Name = Stdin ? "<stdin>" : Path.str();
  llvm::sys::fs::file_t FD;
  if (Stdin) {
    FD = llvm::sys::fs::getStdinHandle();
  } else {
    llvm::Expected<llvm::sys::fs::file_t> Opened =
        llvm::sys::fs::openNativeFileForRead(Path);
    if (!Opened)
      return Opened.takeError();
    FD = *Opened;
  }
  auto Close = [&] {
    if (!Stdin)
      llvm::sys::fs::closeFile(FD);
  };

  // The size of what was opened, not of what the name points to later.
  llvm::sys::fs::file_status Status;
  if (std::error_code EC = llvm::sys::fs::status(FD, Status)) {
    Close();
    return llvm::errorCodeToError(EC);
  }
  if (Status.type() == llvm::sys::fs::file_type::directory_file) {
    Close();
    return llvm::errorCodeToError(
        std::make_error_code(std::errc::is_a_directory));
  }
  bool Regular = Status.type() == llvm::sys::fs::file_type::regular_file;
  if (Regular && Status.getSize() > MaxBytes) {
    Close();
    return tooLarge(MaxBytes, What);
  }
  // Standard input redirected from a file is read from where it stands, as
  // a stream, not from the file's start.
  if (Regular && !Stdin) {
    // A regular file may still grow between the check and the read: the
    // buffer holds the size checked, no more.
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> Buf =
        llvm::MemoryBuffer::getOpenFile(FD, Name, Status.getSize());
    Close();
    if (!Buf)
      return llvm::errorCodeToError(Buf.getError());
    return std::move(*Buf);
  }

  // A pipe, a terminal or a device has no size to check, and standard input
  // is read as a stream: in chunks, one byte past the limit at most.
  constexpr size_t ChunkSize = size_t(1) << 20;
  std::vector<std::unique_ptr<char[]>> Chunks;
  std::vector<size_t> Sizes;
  uint64_t Total = 0;
  while (true) {
    // Not std::make_unique: it would zero a chunk that read() overwrites.
    std::unique_ptr<char[]> Chunk(new char[ChunkSize]);
    size_t Filled = 0;
    while (Filled < ChunkSize) {
      llvm::Expected<size_t> Read = llvm::sys::fs::readNativeFile(
          FD, llvm::MutableArrayRef<char>(Chunk.get() + Filled,
                                          ChunkSize - Filled));
      if (!Read) {
        Close();
        return Read.takeError();
      }
      if (*Read == 0)
        break;
      Filled += *Read;
    }
    Total += Filled;
    if (Total > MaxBytes) {
      Close();
      return tooLarge(MaxBytes, What);
    }
    Chunks.push_back(std::move(Chunk));
    Sizes.push_back(Filled);
    if (Filled < ChunkSize)
      break;
  }
  Close();
  std::unique_ptr<llvm::WritableMemoryBuffer> Buf =
      llvm::WritableMemoryBuffer::getNewUninitMemBuffer(Total, Name);
  if (!Buf)
    return llvm::errorCodeToError(
        std::make_error_code(std::errc::not_enough_memory));
  char *Out = Buf->getBufferStart();
  for (size_t I = 0; I < Chunks.size(); ++I) {
    std::memcpy(Out, Chunks[I].get(), Sizes[I]);
    Out += Sizes[I];
  }
  return std::unique_ptr<llvm::MemoryBuffer>(std::move(Buf));
}

bool mtsched::checkStdoutWritten(llvm::StringRef ToolName) {
  llvm::raw_fd_ostream &Out = llvm::outs();
  Out.flush();
  if (!Out.has_error())
    return true;
  std::error_code EC = Out.error();
  Out.clear_error();
  llvm::WithColor::error(llvm::errs(), ToolName)
      << "cannot write standard output: " << EC.message() << '\n';
  // A lost message must not make stderr's stream abort at exit either.
  llvm::errs().clear_error();
  return false;
}
