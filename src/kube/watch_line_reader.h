// Splits a watch stream into its event lines as the bytes arrive. Each byte
// is looked at once for the newline (a line that comes in many pieces is not
// rescanned from its start), and a line longer than the bound ends the
// stream with an error instead of growing the buffer without limit.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace nvdra::kube {

// Far above any object the API server stores (etcd refuses requests over
// 1.5 MiB by default), so only a hostile or broken stream reaches it.
inline constexpr size_t kMaxWatchEventBytes = 16u << 20;

class WatchLineReader {
 public:
  // Gets one non-blank line (without its newline); an error stops Feed.
  using LineSink = std::function<Status(const std::string& line)>;

  WatchLineReader(std::string what, size_t max_line_bytes = kMaxWatchEventBytes)
      : what_(std::move(what)), max_line_bytes_(max_line_bytes) {}

  // Appends `data` and hands every completed line to `sink`. After an error
  // (the sink's, or a line over the bound) the reader takes nothing more.
  Status Feed(std::string_view data, const LineSink& sink);

  size_t buffered() const { return buffer_.size(); }
  // Bytes searched for a newline so far: at most the bytes fed.
  size_t bytes_scanned() const { return bytes_scanned_; }

 private:
  const std::string what_;
  const size_t max_line_bytes_;
  std::string buffer_;
  size_t scanned_ = 0;  // buffer_[0, scanned_) holds no newline
  size_t bytes_scanned_ = 0;
  Status error_;
};

}  // namespace nvdra::kube
