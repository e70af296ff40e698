// fuzz_session_state: the input is a saved session state file (issue 14),
// read by read_session_state() into the KV cache of a tiny synthetic Qwen3
// with sliding-window layers (window 8 on every other layer), as `pocket
// chat --load` does. The input is tried twice: as it is, and with its last
// 8 bytes replaced by the checksum of the rest, so that mutations get past
// the checksum to the header, size, token and row checks behind it. A
// state that loads must then run a decode step.
#include "fuzz_util.h"
#include "state_model.h"
#include "state/session_state.h"
#include "util/hash64.h"
#include "util/thread_pool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pocket;
  static const std::shared_ptr<Model> model = pocket::fuzz::state_fuzz_model();
  static ThreadPool pool(1);
  static Context ctx(model->config(), pocket::fuzz::kStateFuzzContext);
  std::vector<uint8_t> sealed(data, data + size);
  if (sealed.size() >= 8) {
    Hash64 h;
    h.update(sealed.data(), sealed.size() - 8);
    const uint64_t d = h.digest();
    std::memcpy(sealed.data() + sealed.size() - 8, &d, 8);
  }
  for (const uint8_t* p : {data, static_cast<const uint8_t*>(sealed.data())}) {
    pocket::fuzz::guarded([&] {
      ctx.cache.clear();
      read_session_state(p, size, "fuzz.state", *model, ctx.cache);
      if (ctx.cache.size() < ctx.cache.capacity()) {
        std::vector<float> logits(model->config().vocab_size);
        const int32_t t = 1;
        model->forward(std::span<const int32_t>(&t, 1), ctx, pool, logits.data());
      }
    });
  }
  return 0;
}
