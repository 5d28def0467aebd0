// oneDNN (CPU) cost backend: each op configuration is built as the oneDNN 3.x
// primitive that would run it and timed on one pinned thread. Layouts are
// left to oneDNN ("any"), as a framework would pick them; reorders are not
// charged to the op.
//
// Reproducibility (REFERENCE §11: with 2 OpenMP threads on a small shared
// machine the same sgemm measured 0.96 to 3.01 ms across processes): the
// whole measurement, primitive creation included, runs with one OpenMP
// thread (oneDNN sizes its kernels for the thread count at creation, and a
// team of one never waits on a descheduled worker) on a thread pinned to
// the CPU it is on; both settings are restored afterwards. Time is the
// thread's CPU time (time slices lost to other processes are not charged);
// an op is measured in kRounds rounds (own primitive and buffers each), and
// the median round's estimate is kept. A round's estimate is the 10th
// percentile of its share of `repeats` batches, each at least kBatchMs
// long, after a warm-up of at least `warmup` runs and kWarmupMs of runs
// (scratchpad first touch, caches). All buffers of a round, scratchpad
// included, live in one huge-page arena laid out the same way every time.
#include "taso/cost.h"

#ifdef TASO_WITH_ONEDNN

#include <omp.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "dnnl.hpp"

#endif  // TASO_WITH_ONEDNN

namespace taso {

#ifndef TASO_WITH_ONEDNN

bool onednn_available() { return false; }

std::unique_ptr<CostBackend> make_onednn_backend(const std::string&, int, int,
                                                 const std::string&) {
  throw EngineError(
      "the onednn cost backend is not built: install onednn-cpu-gomp and "
      "onednn-devel-cpu-gomp (requirements.txt) and reinstall xflowrl");
}

#else  // TASO_WITH_ONEDNN

bool onednn_available() { return true; }

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

memory::dims to_dims(const Shape& s) { return memory::dims(s.begin(), s.end()); }

tag plain_tag(size_t rank) {
  switch (rank) {
    case 1: return tag::a;
    case 2: return tag::ab;
    case 3: return tag::abc;
    case 4: return tag::abcd;
    case 5: return tag::abcde;
    case 6: return tag::abcdef;
    default: throw EngineError("onednn: tensors of rank " + std::to_string(rank) +
                               " are not supported");
  }
}

memory::desc plain(const Shape& s) { return memory::desc(to_dims(s), dt::f32, plain_tag(s.size())); }
memory::desc any(const Shape& s) { return memory::desc(to_dims(s), dt::f32, tag::any); }

// Right-aligns `s` to `rank` with leading 1s (numpy broadcasting).
Shape widen(const Shape& s, size_t rank) {
  Shape out(rank - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

algorithm eltwise_of(int act) {
  switch (act) {
    case ACT_RELU: return algorithm::eltwise_relu;
    case ACT_SIGMOID: return algorithm::eltwise_logistic;
    case ACT_TANH: return algorithm::eltwise_tanh;
    default: throw EngineError("onednn: no eltwise for activation " + std::to_string(act));
  }
}

// Every primitive takes its scratchpad from the caller (the Arena below), so
// that all the memory an op touches is placed the same way in every process.
dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::primitive_attr activation_attr(int act) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (act != ACT_NONE) {
    dnnl::post_ops ops;
    ops.append_eltwise(eltwise_of(act), 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// One anonymous mapping, aligned to and advised as 2 MiB transparent huge
// pages (the kernel's THP mode here is "madvise"). Where the kernel grants
// them, a buffer's physical layout within each 2 MiB is that of its virtual
// addresses, so cache-set conflicts and TLB reach no longer depend on which
// 4 KiB frames a process happened to get: with 4 KiB pages a 1x512x512
// matmul (a 1 MiB weight, the size of the L2) measured 0.0196 to 0.0277 ms
// in three processes. Falls back to ordinary pages where THP is refused.
class Arena {
 public:
  static constexpr size_t kHuge = size_t{2} << 20;
  explicit Arena(size_t bytes) : size_(round_up(std::max<size_t>(bytes, 1), kHuge) + kHuge) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw EngineError("onednn: cannot map " + std::to_string(size_) +
                                           " bytes for an op's buffers");
    base_ = static_cast<char*>(p);
    data_ = base_ + (round_up(reinterpret_cast<uintptr_t>(base_), kHuge) -
                     reinterpret_cast<uintptr_t>(base_));
    madvise(data_, size_ - static_cast<size_t>(data_ - base_), MADV_HUGEPAGE);
  }
  ~Arena() { munmap(base_, size_); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  char* data() const { return data_; }
  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

 private:
  size_t size_;
  char* base_;
  char* data_;
};

// One primitive with its argument buffers, ready to run. The memory objects
// are views into `arena` (declared first, so destroyed last).
struct Runnable {
  std::unique_ptr<Arena> arena;
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

// Warm-up lasts at least this long (and `warmup` runs); each timed sample is
// a batch of back-to-back runs at least this long, so that microsecond ops
// are not timed at the clock's and the call's granularity.
constexpr double kWarmupMs = 10.0;
constexpr double kBatchMs = 1.0;
// Independent measurements of an op (`repeats` batches split between them).
constexpr int kRounds = 3;

// For its lifetime the calling thread runs oneDNN alone: OpenMP limited to
// one thread, the thread pinned to the CPU it is on. Both are restored on
// destruction, so threads the caller creates later do not inherit the pin.
// Pinning is best effort (a failing sched_setaffinity leaves it unpinned).
class SoloThread {
 public:
  SoloThread() : threads_(omp_get_max_threads()) {
    omp_set_num_threads(1);
    CPU_ZERO(&saved_);
    if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
    int cpu = sched_getcpu();
    if (cpu < 0 || !CPU_ISSET(cpu, &saved_)) {
      for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved_); ++cpu) {}
      if (cpu == CPU_SETSIZE) return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~SoloThread() {
    if (pinned_) sched_setaffinity(0, sizeof(saved_), &saved_);
    omp_set_num_threads(threads_);
  }
  SoloThread(const SoloThread&) = delete;
  SoloThread& operator=(const SoloThread&) = delete;

 private:
  int threads_;
  cpu_set_t saved_;
  bool pinned_ = false;
};

// CPU time of the calling thread, in ms. On a shared machine the measuring
// thread is descheduled for whole time slices (sched_autogroup shares the
// CPUs between sessions whatever their nice values): wall-clock batches would
// charge those slices to the op, the thread's CPU time does not.
double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

class OneDnnBackend : public CostBackend {
 public:
  OneDnnBackend(const std::string& cache_path, int warmup, int repeats,
                const std::string& reference_path)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_),
        cache_path_(cache_path), warmup_(warmup), repeats_(repeats),
        fallback_(make_analytic_backend("cpu")) {
    if (warmup < 0 || repeats < 1)
      throw EngineError("onednn: warmup must be >= 0 and repeats >= 1");
    if (!cache_path_.empty()) load_cost_cache(cache_path_, "onednn", &cache_);
    // Loaded last, so the reference wins over the cache; never written.
    if (!reference_path.empty()) {
      std::ifstream probe(reference_path);
      if (!probe) throw EngineError("onednn: cannot read the reference cost table " +
                                    reference_path);
      load_cost_cache(reference_path, "onednn", &cache_);
    }
  }
  std::string name() const override { return "onednn"; }

 protected:
  double measure(const OpConfig& op) override {
    double ms;
    if (op.type == OP_OPAQUE) {
      ms = fallback_->op_cost(op);
    } else {
      try {
        // Rounds of build, place and time, each with its own primitive and
        // buffers; the median round is kept, so that one round gone wrong
        // (once, an add of 64x1024 read 458 ms in every batch of a round)
        // does not decide the estimate.
        SoloThread solo;  // before build(): kernels are sized for the thread count
        const int batches = (repeats_ + kRounds - 1) / kRounds;
        std::vector<double> rounds;
        for (int i = 0; i < kRounds; ++i) {
          Runnable r = build(op);
          rounds.push_back(time(&r, batches));
        }
        std::sort(rounds.begin(), rounds.end());
        ms = rounds[rounds.size() / 2];
      } catch (const dnnl::error& e) {
        throw EngineError("onednn: cannot run " + op.key() + ": " + e.what());
      }
    }
    if (!cache_path_.empty()) append_cost_cache(cache_path_, op.key(), ms);
    return ms;
  }

 private:
  // A buffer without storage; place() gives it its place in the arena.
  memory alloc(const memory::desc& md) { return memory(md, engine_, DNNL_MEMORY_NONE); }

  // Lays every argument (and the scratchpad) out in one huge-page arena, in
  // argument order, each 64-byte aligned and 17 cache lines after the
  // previous one (so that no two buffers start 4 KiB apart, which would
  // alias in the load/store queues), and fills it with 0.01: finite values,
  // no denormals, every page touched before timing.
  void place(Runnable* r) {
    const_dnnl_memory_desc_t pad = dnnl_primitive_desc_query_md(
        r->prim.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
    const size_t pad_bytes = pad ? dnnl_memory_desc_get_size(pad) : 0;
    if (pad_bytes > 0)
      r->args.emplace(DNNL_ARG_SCRATCHPAD,
                      alloc(memory::desc({static_cast<memory::dim>(pad_bytes)}, dt::u8, tag::a)));
    std::vector<int> order;
    for (const auto& kv : r->args) order.push_back(kv.first);
    std::sort(order.begin(), order.end());
    constexpr size_t kGap = 17 * 64;
    std::vector<size_t> offsets;
    size_t end = 0;
    for (int arg : order) {
      offsets.push_back(end);
      end = Arena::round_up(end + r->args.at(arg).get_desc().get_size(), 64) + kGap;
    }
    r->arena = std::make_unique<Arena>(end);
    float* f = reinterpret_cast<float*>(r->arena->data());
    std::fill(f, f + end / sizeof(float), 0.01f);
    for (size_t i = 0; i < order.size(); ++i)
      r->args.at(order[i]).set_data_handle(r->arena->data() + offsets[i]);
  }

  Runnable build(const OpConfig& op) {
    Runnable r;
    build_primitive(op, &r);
    place(&r);
    return r;
  }

  // The primitive that runs `op` and its arguments (without storage) into
  // *rp; throws EngineError for a type oneDNN does not run. Over the enum,
  // without a default: -Wswitch refuses a type left out.
  void build_primitive(const OpConfig& op, Runnable* rp) {
    const auto& in = op.input_shapes;
    const auto& out = op.output_shapes;
    const OpParams& p = op.params;
    Runnable& r = *rp;
    switch (static_cast<OpType>(op.type)) {
      case OP_CONV2D: {
        const Shape& x = in[0];
        const Shape& w = in[1];
        int64_t groups = x[1] / w[1];
        memory::dims wdims = groups > 1
            ? memory::dims{groups, w[0] / groups, w[1], w[2], w[3]}
            : to_dims(w);
        ConvGeometry g = conv_geometry(x[2], x[3], w[2], w[3], p.stride_h, p.stride_w,
                                       p.padding);
        dnnl::convolution_forward::primitive_desc pd(
            engine_, dnnl::prop_kind::forward_inference, algorithm::convolution_direct,
            any(x), memory::desc(wdims, dt::f32, tag::any), any(out[0]),
            {p.stride_h, p.stride_w}, {g.pad_top, g.pad_left},
            {g.pad_bottom, g.pad_right}, activation_attr(p.activation));
        r.prim = dnnl::convolution_forward(pd);
        r.args = {{DNNL_ARG_SRC, alloc(pd.src_desc())},
                  {DNNL_ARG_WEIGHTS, alloc(pd.weights_desc())},
                  {DNNL_ARG_DST, alloc(pd.dst_desc())}};
        return;
      }
      case OP_MATMUL: {
        dnnl::matmul::primitive_desc pd(engine_, plain(in[0]), plain(in[1]),
                                        plain(out[0]), activation_attr(p.activation));
        r.prim = dnnl::matmul(pd);
        r.args = {{DNNL_ARG_SRC, alloc(pd.src_desc())},
                  {DNNL_ARG_WEIGHTS, alloc(pd.weights_desc())},
                  {DNNL_ARG_DST, alloc(pd.dst_desc())}};
        return;
      }
      case OP_POOL_MAX:
      case OP_POOL_AVG: {
        ConvGeometry g = conv_geometry(in[0][2], in[0][3], p.kernel_h, p.kernel_w,
                                       p.stride_h, p.stride_w, p.padding);
        dnnl::pooling_forward::primitive_desc pd(
            engine_, dnnl::prop_kind::forward_inference,
            op.type == OP_POOL_MAX ? algorithm::pooling_max
                                   : algorithm::pooling_avg_exclude_padding,
            plain(in[0]), plain(out[0]), {p.stride_h, p.stride_w},
            {p.kernel_h, p.kernel_w}, {0, 0}, {g.pad_top, g.pad_left},
            {g.pad_bottom, g.pad_right}, activation_attr(p.activation));
        r.prim = dnnl::pooling_forward(pd);
        r.args = {{DNNL_ARG_SRC, alloc(pd.src_desc())},
                  {DNNL_ARG_DST, alloc(pd.dst_desc())}};
        return;
      }
      case OP_RELU:
      case OP_SIGMOID:
      case OP_TANH: {
        const int act = op_type_info(op.type)->activation;  // the op table's
        dnnl::eltwise_forward::primitive_desc pd(engine_, dnnl::prop_kind::forward_inference,
                                                 eltwise_of(act), plain(in[0]), plain(out[0]),
                                                 0.f, 0.f, user_scratchpad_attr());
        r.prim = dnnl::eltwise_forward(pd);
        r.args = {{DNNL_ARG_SRC, alloc(pd.src_desc())}, {DNNL_ARG_DST, alloc(pd.dst_desc())}};
        return;
      }
      case OP_EW_ADD:
      case OP_EW_MUL:
      case OP_SCALAR_MUL:
      case OP_EW_SUB:
      case OP_EW_DIV:
      case OP_BROADCAST_ADD: {
        size_t rank = out[0].size();
        Shape b = op.type == OP_BROADCAST_ADD ? Shape{in[1][0]} : in[1];
        if (op.type == OP_BROADCAST_ADD) {
          b = Shape(rank, 1);
          b[1] = in[1][0];
        }
        algorithm alg = op.type == OP_EW_MUL || op.type == OP_SCALAR_MUL ? algorithm::binary_mul
                      : op.type == OP_EW_SUB ? algorithm::binary_sub
                      : op.type == OP_EW_DIV ? algorithm::binary_div
                                             : algorithm::binary_add;
        Shape a = widen(in[0], rank);
        // oneDNN broadcasts src1 only: keep the full-size operand first.
        if (num_elements(a) < num_elements(out[0])) std::swap(a, b);
        dnnl::binary::primitive_desc pd(engine_, alg, plain(a), plain(widen(b, rank)),
                                        plain(out[0]), user_scratchpad_attr());
        r.prim = dnnl::binary(pd);
        r.args = {{DNNL_ARG_SRC_0, alloc(pd.src0_desc())},
                  {DNNL_ARG_SRC_1, alloc(pd.src1_desc())},
                  {DNNL_ARG_DST, alloc(pd.dst_desc())}};
        return;
      }
      case OP_BATCHNORM: {
        auto flags = dnnl::normalization_flags::use_global_stats |
                     dnnl::normalization_flags::use_scale |
                     dnnl::normalization_flags::use_shift;
        dnnl::batch_normalization_forward::primitive_desc pd(
            engine_, dnnl::prop_kind::forward_inference, plain(in[0]), plain(out[0]),
            p.epsilon, flags, user_scratchpad_attr());
        memory::desc vec = plain(in[1]);
        r.prim = dnnl::batch_normalization_forward(pd);
        r.args = {{DNNL_ARG_SRC, alloc(pd.src_desc())}, {DNNL_ARG_DST, alloc(pd.dst_desc())},
                  {DNNL_ARG_MEAN, alloc(vec)}, {DNNL_ARG_VARIANCE, alloc(vec)},
                  {DNNL_ARG_SCALE, alloc(vec)}, {DNNL_ARG_SHIFT, alloc(vec)}};
        return;
      }
      case OP_CONCAT: {
        std::vector<memory::desc> srcs;
        for (const Shape& s : in) srcs.push_back(plain(s));
        dnnl::concat::primitive_desc pd(engine_, p.axis, srcs, user_scratchpad_attr());
        r.prim = dnnl::concat(pd);
        for (size_t i = 0; i < srcs.size(); ++i)
          r.args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), alloc(srcs[i]));
        r.args.emplace(DNNL_ARG_DST, alloc(pd.dst_desc()));
        return;
      }
      // Not run by oneDNN: opaque ops are priced by the analytic roofline
      // (measure); free types never reach a backend.
      case OP_OPAQUE:
      case OP_INPUT:
      case OP_WEIGHT:
      case OP_SPLIT:
      case OP_RESHAPE:
      case OP_TRANSPOSE:
      case OP_ENLARGE:
      case OP_MERGE_GCONV:
      case OP_FUSE_CONV_BN_ALPHA_VAR:
      case OP_FUSE_CONV_BN_BIAS:
        break;
    }
    throw EngineError(std::string("onednn: no primitive for ") + op_type_name(op.type));
  }

  // Milliseconds per run: the 10th percentile (the fastest for fewer than 10)
  // of `batches` batches' mean run time, after warm-up. Caller holds a
  // SoloThread.
  double time(Runnable* r, int batches) {
    double start = now_ms();
    int runs = 0;
    double last = 0;
    while (runs < std::max(warmup_, 1) || now_ms() - start < kWarmupMs) {
      const double t = now_ms();
      run(r);
      last = now_ms() - t;
      ++runs;
    }
    // The batch size comes from the slower of the last warm-up run and the
    // warm-up's mean, so one lucky run does not make batches too short.
    const double per_run = std::max(last, (now_ms() - start) / runs);
    const int batch = std::max(1, static_cast<int>(std::ceil(kBatchMs / std::max(per_run, 1e-6))));
    std::vector<double> samples;
    samples.reserve(batches);
    for (int i = 0; i < batches; ++i) {
      const double t = now_ms();
      for (int j = 0; j < batch; ++j) run(r);
      samples.push_back((now_ms() - t) / batch);
    }
    // Interference (other processes' cache traffic, frequency changes,
    // interrupts) only ever slows a batch down, so the estimate is a fast
    // batch; not the fastest, though: on this VM a lone batch now and then
    // reads far faster than the rest (most likely steal time subtracted from
    // the thread's clock in a lump), so the fastest tenth is dropped
    // (docs/engine.md).
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 10];
  }

  void run(Runnable* r) {
    r->prim.execute(stream_, r->args);
    stream_.wait();
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::string cache_path_;
  int warmup_;
  int repeats_;
  std::unique_ptr<CostBackend> fallback_;
};

}  // namespace

std::unique_ptr<CostBackend> make_onednn_backend(const std::string& cache_path,
                                                 int warmup, int repeats,
                                                 const std::string& reference_path) {
  try {
    return std::make_unique<OneDnnBackend>(cache_path, warmup, repeats, reference_path);
  } catch (const dnnl::error& e) {
    throw EngineError(std::string("onednn: cannot create a CPU engine: ") + e.what());
  }
}

#endif  // TASO_WITH_ONEDNN

}  // namespace taso
