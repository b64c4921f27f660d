// A long-running inference service. The model (32 layers, hidden 4096, vocabulary 32000, fp16; about
// 13 GiB of weights) is loaded once. Requests arrive at random, up to 8 in flight; each has its own batch
// size (1-8), prompt length (32-2048 tokens, log-uniform) and number of generated tokens (8-256). A request
// allocates a KV cache per layer sized by batch x (prompt + generated) tokens, runs a prefill whose
// temporaries scale with batch x prompt (attention scores with its square), then decodes 16 tokens per
// simulated second with small temporaries, and frees its KV cache when done. Lifetimes overlap and sizes
// never repeat exactly, which is what slowly fragments a caching allocator over days of traffic.
#include <cmath>
#include <random>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/workload/trace_builder.hpp"
#include "vram/workload/workload.hpp"

namespace vram {

namespace detail {

constexpr std::uint64_t layers = 32, hidden = 4096, ffn = 11008, heads = 32, vocab = 32000, fp16 = 2;
constexpr int max_in_flight = 8;
constexpr std::uint64_t tokens_per_second = 16;

struct request {
  std::uint64_t batch, prompt, remaining;
  std::vector<std::uint64_t> kv;  // one block per layer
  std::uint64_t kv_bytes;
};

}  // namespace detail

trace make_inference_workload(const workload_options& options) {
  using namespace detail;
  trace_builder b("inference");
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<std::uint64_t> batch_dist(1, 8), gen_dist(8, 256);
  std::uniform_real_distribution<double> log_prompt(std::log2(32.0), std::log2(2048.0));
  std::bernoulli_distribution arrives(0.5);

  std::int64_t t = 0;  // microseconds; events inside one simulated second are 1 us apart
  auto keep = [&](std::uint64_t bytes) { (void)b.alloc(t++, bytes); };
  keep(vocab * hidden * fp16);  // embeddings
  for (std::uint64_t l = 0; l < layers; ++l) {
    keep(3 * hidden * hidden * fp16);  // qkv projection
    keep(hidden * hidden * fp16);      // output projection
    keep(2 * ffn * hidden * fp16);     // gate and up
    keep(ffn * hidden * fp16);         // down
  }
  auto temp = [&](std::uint64_t bytes) {
    const auto a = b.alloc(t++, bytes);
    return std::pair{a, bytes};
  };

  std::vector<request> active;
  const auto seconds = static_cast<std::int64_t>(options.hours * 3600.0);
  for (std::int64_t s = 1; s <= seconds; ++s) {
    t = std::max<std::int64_t>(t, s * 1000000);
    if (static_cast<int>(active.size()) < max_in_flight && arrives(rng)) {
      request r;
      r.batch = batch_dist(rng);
      r.prompt = static_cast<std::uint64_t>(std::exp2(log_prompt(rng)));
      r.remaining = gen_dist(rng);
      r.kv_bytes = 2 * r.batch * (r.prompt + r.remaining) * hidden * fp16;
      for (std::uint64_t l = 0; l < layers; ++l) r.kv.push_back(b.alloc(t++, r.kv_bytes));
      // Prefill: activations, attention scores and the MLP's intermediate, freed after the pass.
      const auto x = temp(r.batch * r.prompt * hidden * fp16);
      const auto scores = temp(r.batch * heads * r.prompt * r.prompt * fp16);
      b.free(t++, scores.first, scores.second);
      const auto mlp = temp(r.batch * r.prompt * ffn * fp16);
      b.free(t++, mlp.first, mlp.second);
      b.free(t++, x.first, x.second);
      active.push_back(std::move(r));
    }
    for (auto it = active.begin(); it != active.end();) {
      // One decode step for the tokens of this second: hidden state and fp32 logits.
      const auto h = temp(it->batch * hidden * fp16);
      const auto logits = temp(it->batch * vocab * 4);
      b.free(t++, logits.first, logits.second);
      b.free(t++, h.first, h.second);
      it->remaining = it->remaining > tokens_per_second ? it->remaining - tokens_per_second : 0;
      if (it->remaining == 0) {
        for (auto a : it->kv) b.free(t++, a, it->kv_bytes);
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }
  return b.take();
}

}  // namespace vram
