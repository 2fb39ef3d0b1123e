// A thread of a bounded pool that is about to wait for something other than
// CPU (a ComputeDomain's IMEX daemon to report ready, an MPS daemon to
// start) says so for the length of the wait, so that the pool lets another
// thread take queued work meanwhile: a claim waiting for its domain must
// not hold up the claims behind it, among them the IMEX daemon's own claim
// it waits for. Outside such a pool a BlockingRegion does nothing.
#pragma once

namespace nvdra {

class BlockingRegion {
 public:
  // What a pool does when one of its threads starts and stops waiting.
  class Pool {
   public:
    virtual void EnterBlocking() = 0;
    virtual void LeaveBlocking() = 0;

   protected:
    ~Pool() = default;
  };
  // Set by a pool on each of its threads (null: none).
  static void SetThreadPool(Pool* pool);

  BlockingRegion();
  ~BlockingRegion();
  BlockingRegion(const BlockingRegion&) = delete;
  BlockingRegion& operator=(const BlockingRegion&) = delete;

 private:
  Pool* pool_;
};

}  // namespace nvdra
