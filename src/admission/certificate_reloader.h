// The TLS certificate of nvdra-webhook, kept current without a restart:
// cert-manager renews the Secret in place and the kubelet swaps the files
// of the volume, so the files are looked at again on a thread of their own
// (when a new connection asks, and every check_interval) and read again when
// they changed. Only regular files are read, and only so much of them: a
// FIFO, a device or a huge file at the path is refused, so a bad path never
// blocks. A file system that hangs stalls only that thread. Until a changed
// pair reads well, the last good certificate is served.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "util/status.h"

namespace boost::asio::ssl {
class context;
}

namespace nvdra::admission {

// Certificates and keys are a few KiB; a chain of many is still far below.
inline constexpr size_t kMaxPemFileBytes = 1u << 20;

// The contents of `path` when it is a regular file of at most `max_bytes`;
// opened without blocking, so a FIFO or a device is an error, not a hang.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

// A server TLS context (TLS 1.2 or later) from a PEM certificate chain and
// its private key. Errors name the flag of the file at fault.
Result<std::shared_ptr<boost::asio::ssl::context>> LoadServerTls(const std::string& cert_file,
                                                                 const std::string& key_file);

class CertificateReloader {
 public:
  // Reads the files once (an error when they do not make a context) and
  // starts the thread that watches them.
  static Result<std::unique_ptr<CertificateReloader>> Start(std::string cert_file, std::string key_file,
                                                            std::chrono::milliseconds check_interval);
  ~CertificateReloader();
  CertificateReloader(const CertificateReloader&) = delete;
  CertificateReloader& operator=(const CertificateReloader&) = delete;

  // The context a new connection is to use; never blocks on the files.
  // Asks the thread to look at them.
  std::shared_ptr<boost::asio::ssl::context> Current();

  // Ends the thread: joined when it ends within a short wait, else left to
  // finish (it owns what it uses) so that stopping never hangs on a file
  // system. Idempotent.
  void Stop();

  struct State;

 private:
  CertificateReloader() = default;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace nvdra::admission
