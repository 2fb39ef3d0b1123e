#include "admission/certificate_reloader.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/ssl/context.hpp>

#include "util/log.h"
#include "util/mutex.h"
#include "util/thread_name.h"

namespace nvdra::admission {
namespace {

namespace ssl = boost::asio::ssl;
using Clock = std::chrono::steady_clock;

// A changed pair that failed to read is tried again after this long even if
// it does not change again.
constexpr std::chrono::seconds kRetryFailed{10};
// How long Stop waits for the thread before leaving it behind.
constexpr std::chrono::milliseconds kStopWait{200};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// What identifies a version of a file: a Secret volume swaps its files by
// renaming a directory, which changes the inode and times.
struct FileStamp {
  struct timespec mtime {};
  off_t size = -1;
  ino_t ino = 0;
  bool operator==(const FileStamp& o) const {
    return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size && ino == o.ino;
  }
};

FileStamp StampOf(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) == 0) {
    s.mtime = st.st_mtim;
    s.size = st.st_size;
    s.ino = st.st_ino;
  }
  return s;
}

struct PairStamp {
  FileStamp cert, key;
  bool operator==(const PairStamp&) const = default;
};

// Key material is wiped from memory once OpenSSL has its copy.
struct Wiped {
  std::string text;
  ~Wiped() { OPENSSL_cleanse(text.data(), text.size()); }
};

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using OwnedBio = std::unique_ptr<BIO, BioDeleter>;

OwnedBio MemoryBio(const std::string& text) {
  return OwnedBio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The leaf certificate, then each intermediate CA after it.
Status UseCertificateChain(SSL_CTX* ctx, const std::string& pem) {
  OwnedBio bio = MemoryBio(pem);
  X509* leaf = bio ? PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (leaf == nullptr) return InvalidArgument("cannot read a PEM certificate: " + OpenSslError());
  const bool used = SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  if (!used) return InvalidArgument("cannot use the certificate: " + OpenSslError());
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      return InvalidArgument("cannot use an intermediate certificate: " + OpenSslError());
    }
  }
  // The loop ends at the end of the text, which OpenSSL reports as an error.
  ERR_clear_error();
  return Status::Ok();
}

Status UsePrivateKey(SSL_CTX* ctx, const std::string& pem) {
  OwnedBio bio = MemoryBio(pem);
  EVP_PKEY* key = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (key == nullptr) return InvalidArgument("cannot read a PEM private key: " + OpenSslError());
  const bool used = SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!used || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return FailedPrecondition("does not match the certificate");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Unavailable("cannot open: " + std::string(std::strerror(errno)));
  struct stat st {};
  std::string out;
  Status status = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    status = Unavailable("cannot stat: " + std::string(std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = InvalidArgument("not a regular file");
  } else if (static_cast<size_t>(st.st_size) > max_bytes) {
    status = InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes");
  } else {
    out.resize(max_bytes + 1);
    size_t got = 0;
    for (ssize_t n; got < out.size() && (n = ::read(fd, out.data() + got, out.size() - got)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = Unavailable("cannot read: " + std::string(std::strerror(errno)));
        break;
      }
      got += static_cast<size_t>(n);
    }
    if (status.ok() && got > max_bytes) status = InvalidArgument("larger than " + std::to_string(max_bytes) + " bytes");
    out.resize(got);
  }
  ::close(fd);
  if (!status.ok()) {
    OPENSSL_cleanse(out.data(), out.size());
    return status;
  }
  return out;
}

Result<std::shared_ptr<ssl::context>> LoadServerTls(const std::string& cert_file, const std::string& key_file) {
  auto cert = ReadRegularFile(cert_file, kMaxPemFileBytes);
  if (!cert.ok()) return InvalidArgument("--tls-cert-file " + cert_file + ": " + cert.status().message());
  auto key_text = ReadRegularFile(key_file, kMaxPemFileBytes);
  if (!key_text.ok()) return InvalidArgument("--tls-private-key-file " + key_file + ": " + key_text.status().message());
  Wiped key{std::move(key_text).value()};

  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  ERR_clear_error();
  if (Status st = UseCertificateChain(native, *cert); !st.ok()) {
    return InvalidArgument("--tls-cert-file " + cert_file + ": " + st.message());
  }
  if (Status st = UsePrivateKey(native, key.text); !st.ok()) {
    if (st.code() == StatusCode::kFailedPrecondition) {
      return InvalidArgument("--tls-private-key-file " + key_file + " does not match the certificate in " + cert_file);
    }
    return InvalidArgument("--tls-private-key-file " + key_file + ": " + st.message());
  }
  return ctx;
}

// What the reloading thread shares with the server; the thread holds it too,
// so a thread left behind by Stop never touches freed memory.
struct CertificateReloader::State {
  std::string cert_file, key_file;
  std::chrono::milliseconds check_interval{};

  Mutex mu;
  CondVar cv;
  std::shared_ptr<ssl::context> current GUARDED_BY(mu);
  bool asked GUARDED_BY(mu) = false;
  bool stopping GUARDED_BY(mu) = false;
  bool ended GUARDED_BY(mu) = false;

  // Touched by the thread alone.
  PairStamp loaded;
  PairStamp failed;
  Clock::time_point retry_failed_after;

  PairStamp Stamps() const { return {StampOf(cert_file), StampOf(key_file)}; }

  // Reads the files again when they changed; never holds `mu` meanwhile.
  void Check() EXCLUDES(mu) {
    const PairStamp now = Stamps();
    if (now == loaded) return;
    if (now == failed && Clock::now() < retry_failed_after) return;
    auto fresh = LoadServerTls(cert_file, key_file);
    if (!fresh.ok()) {
      NVDRA_ERROR("webhook: keeping the previous certificate: {}", fresh.status().message());
      failed = now;
      retry_failed_after = Clock::now() + kRetryFailed;
      return;
    }
    NVDRA_INFO("webhook: serving the certificate read again from {}", cert_file);
    loaded = now;
    MutexLock lock(mu);
    current = std::move(fresh).value();
  }

  void Run() EXCLUDES(mu) {
    SetThreadName("webhook-certs");
    MutexLock lock(mu);
    while (!stopping) {
      cv.WaitFor(mu, check_interval, [&]() REQUIRES(mu) { return asked || stopping; });
      if (stopping) break;
      asked = false;
      lock.Unlock();
      Check();
      lock.Lock();
    }
    ended = true;
    cv.NotifyAll();
  }
};

Result<std::unique_ptr<CertificateReloader>> CertificateReloader::Start(std::string cert_file, std::string key_file,
                                                                        std::chrono::milliseconds check_interval) {
  auto state = std::make_shared<State>();
  state->cert_file = std::move(cert_file);
  state->key_file = std::move(key_file);
  state->check_interval = check_interval;
  // The stamps are taken before the read: a change in between is read again.
  state->loaded = state->Stamps();
  NVDRA_ASSIGN_OR_RETURN(auto first, LoadServerTls(state->cert_file, state->key_file));
  {
    MutexLock lock(state->mu);
    state->current = std::move(first);
  }
  std::unique_ptr<CertificateReloader> r(new CertificateReloader());
  r->state_ = state;
  r->thread_ = std::thread([state] { state->Run(); });
  return r;
}

CertificateReloader::~CertificateReloader() { Stop(); }

std::shared_ptr<ssl::context> CertificateReloader::Current() {
  State& s = *state_;
  MutexLock lock(s.mu);
  if (!s.asked) {
    s.asked = true;
    s.cv.NotifyAll();
  }
  return s.current;
}

void CertificateReloader::Stop() {
  if (!thread_.joinable()) return;
  State& s = *state_;
  bool ended = false;
  {
    MutexLock lock(s.mu);
    s.stopping = true;
    s.cv.NotifyAll();
    ended = s.cv.WaitFor(s.mu, kStopWait, [&]() REQUIRES(s.mu) { return s.ended; });
  }
  if (ended) {
    thread_.join();
  } else {
    NVDRA_ERROR("webhook: reading {} or {} does not return; stopping without waiting for it", s.cert_file, s.key_file);
    thread_.detach();
  }
}

}  // namespace nvdra::admission
