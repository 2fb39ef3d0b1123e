#include "kube/watch_line_reader.h"

namespace nvdra::kube {

Status WatchLineReader::Feed(std::string_view data, const LineSink& sink) {
  if (!error_.ok()) return error_;
  buffer_.append(data);
  size_t start = 0;
  for (;;) {
    size_t from = std::max(start, scanned_);
    size_t nl = buffer_.find('\n', from);
    bytes_scanned_ += (nl == std::string::npos ? buffer_.size() : nl + 1) - from;
    if (nl == std::string::npos) break;
    if (nl - start > max_line_bytes_) break;  // reported below
    std::string line = buffer_.substr(start, nl - start);
    start = nl + 1;
    scanned_ = start;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (Status s = sink(line); !s.ok()) {
      error_ = s;
      buffer_.clear();
      return s;
    }
  }
  buffer_.erase(0, start);
  scanned_ = buffer_.size();
  if (buffer_.size() > max_line_bytes_) {
    error_ = InvalidArgument(what_ + ": an event is longer than " + std::to_string(max_line_bytes_) +
                             " bytes; ending the watch");
    buffer_.clear();
    buffer_.shrink_to_fit();
    return error_;
  }
  return Status::Ok();
}

}  // namespace nvdra::kube
