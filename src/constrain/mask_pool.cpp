#include "constrain/mask_pool.h"

namespace pocket::constrain {

MaskPool::Buffer MaskPool::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      Buffer b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  return Buffer(new uint64_t[words_ == 0 ? 1 : words_]);
}

void MaskPool::give_back(std::vector<Buffer>& buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Buffer& b : buffers)
    if (free_.size() < max_free_) free_.push_back(std::move(b));
  buffers.clear();  // frees those over the cap
}

size_t MaskPool::free_buffers() {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace pocket::constrain

namespace pocket::constrain {

MaskStore& MaskStore::operator=(MaskStore&& o) noexcept {
  if (this != &o) {
    clear();
    pool_ = std::move(o.pool_);
    words_ = o.words_;
    owned_ = std::move(o.owned_);
  }
  return *this;
}

uint64_t* MaskStore::take() {
  owned_.push_back(pool_ ? pool_->take() : MaskPool::Buffer(new uint64_t[words_ == 0 ? 1 : words_]));
  return owned_.back().get();
}

void MaskStore::clear() {
  if (pool_)
    pool_->give_back(owned_);
  else
    owned_.clear();
}

}  // namespace pocket::constrain
