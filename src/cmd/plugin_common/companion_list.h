// What a device kind relies on beside itself (watches, background loops, the
// directories they keep), held by the plugin for as long as the kind and
// taken down right after it in one documented order: every companion is
// stopped, the last added first, and only then are they destroyed, again
// the last added first. A kind adds each part as soon as it has built it, so
// a part started later (one that uses an earlier one) stops before the part
// it uses, and a factory that fails half way still has what it built taken
// down in that order.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace nvdra::plugin {

// One part the plugin stops before it is destroyed. Stop() ends the part's
// threads and returns when they are gone; the list calls it exactly once.
class Companion {
 public:
  virtual ~Companion() = default;
  virtual void Stop() = 0;
};

class CompanionList {
 public:
  CompanionList() = default;
  ~CompanionList() { Clear(); }
  CompanionList(const CompanionList&) = delete;
  CompanionList& operator=(const CompanionList&) = delete;

  // Holds `part` (anything with a Stop()); returns it for the caller's use.
  template <typename T>
  T& Add(std::unique_ptr<T> part) {
    T& ref = *part;
    parts_.push_back(std::make_unique<Held<T>>(std::move(part)));
    return ref;
  }
  // Holds a passive `part` (no threads of its own: nothing to stop) that
  // must live as long as the kind; destroyed in the same order as the rest.
  template <typename T>
  T& Keep(std::unique_ptr<T> part) {
    T& ref = *part;
    parts_.push_back(std::make_unique<Kept<T>>(std::move(part)));
    return ref;
  }

  // Stops every part, the last added first, then destroys them in the same
  // order. The list is empty afterwards.
  void Clear() {
    for (auto it = parts_.rbegin(); it != parts_.rend(); ++it) (*it)->Stop();
    while (!parts_.empty()) parts_.pop_back();
  }

  size_t size() const { return parts_.size(); }

 private:
  template <typename T>
  struct Held final : Companion {
    explicit Held(std::unique_ptr<T> p) : part(std::move(p)) {}
    void Stop() override { part->Stop(); }
    std::unique_ptr<T> part;
  };
  template <typename T>
  struct Kept final : Companion {
    explicit Kept(std::unique_ptr<T> p) : part(std::move(p)) {}
    void Stop() override {}
    std::unique_ptr<T> part;
  };

  std::vector<std::unique_ptr<Companion>> parts_;
};

}  // namespace nvdra::plugin
