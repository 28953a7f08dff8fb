// bert_tf's fused CPU kernels for TensorFlow, compiled on first use by bert_tf/model/custom_ops.py.
//
// BertGeluTanh / BertGeluTanhGrad: the original BERT's GELU, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))),
// and its derivative, each in one vectorised pass. TensorFlow runs the same formula as ~8 element-wise
// kernels forward and ~8 backward when training (its matmul fusion of GELU applies to inference only);
// these two take about a fifth of that time. Float32 only; tanh is Eigen's packet tanh, as TensorFlow's Tanh op uses.
//
// BertGeluErf / BertGeluErfGrad: the exact GELU, x Phi(x) = 0.5x(1 + erf(x/sqrt 2)) (Hugging Face's "gelu"), and
// its derivative Phi(x) + x phi(x), each in one vectorised pass. Phi(x) is computed as 0.5 erfc(-x/sqrt 2), as
// tf.nn.gelu(approximate=False) does: the same value, but 1 + erf(x/sqrt 2) loses all relative accuracy for
// x < -4 by cancellation (absolute errors up to ~1e-6 in y), erfc does not. erfc is Eigen's packet erfc (a rational
// approximation within ~5 ulp, the one TensorFlow's Erfc op uses); phi's exp is Eigen's packet exp.
//
// BertLayerNorm / BertLayerNormGrad: LayerNorm over the last axis with the original's arithmetic
// (tf.nn.moments, then y = x * (gamma * rsqrt(var + eps)) + (beta - mean * gamma * rsqrt(var + eps))), one
// pass per row forward and backward instead of ~10 kernels over the whole tensor each way. The backward
// pass sums dgamma/dbeta over fixed blocks of rows in a fixed order. All kernels are bit-for-bit reproducible:
// fixed summation orders, the same packet arithmetic for every element, no FMA contraction (-ffp-contract=off).
#define EIGEN_USE_THREADS
#include <algorithm>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/util/work_sharder.h"
#include "unsupported/Eigen/CXX11/Tensor"
#include "unsupported/Eigen/SpecialFunctions"

namespace bert_tf {
namespace {

using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

struct GeluTanh {
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& x) const {
    using namespace Eigen::internal;
    const Packet one = pset1<Packet>(1.f);
    Packet inner = pmul(pmul(pset1<Packet>(kSqrt2OverPi), x), padd(one, pmul(pset1<Packet>(kCubic), pmul(x, x))));
    Packet half_x = pmul(pset1<Packet>(0.5f), x);
    return padd(half_x, pmul(half_x, ptanh(inner)));
  }
};

// d/dx gelu(x) = 0.5(1 + t) + 0.5x(1 - t^2) sqrt(2/pi)(1 + 3 * 0.044715x^2), t = tanh(inner); times dy.
struct GeluTanhGrad {
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& dy, const Packet& x) const {
    using namespace Eigen::internal;
    const Packet one = pset1<Packet>(1.f), half = pset1<Packet>(0.5f);
    Packet x2 = pmul(x, x);
    Packet t = ptanh(pmul(pmul(pset1<Packet>(kSqrt2OverPi), x), padd(one, pmul(pset1<Packet>(kCubic), x2))));
    Packet slope = pmul(pset1<Packet>(kSqrt2OverPi), padd(one, pmul(pset1<Packet>(3.f * kCubic), x2)));
    Packet outer = pmul(half, padd(one, t));
    Packet inner = pmul(pmul(pmul(half, x), psub(one, pmul(t, t))), slope);
    return pmul(dy, padd(outer, inner));
  }
};

constexpr float kMinusSqrtHalf = -0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
// Beyond |x| = 16 x phi(x) is 0 in float32 (exp(-128) underflows); clamping keeps x = +-inf from giving inf * 0.
constexpr float kPdfClamp = 16.f;

// x Phi(x), Phi(x) = 0.5 erfc(-x/sqrt 2).
struct GeluErf {
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& x) const {
    using namespace Eigen::internal;
    Packet half_x = pmul(pset1<Packet>(0.5f), x);
    return pmul(half_x, perfc(pmul(pset1<Packet>(kMinusSqrtHalf), x)));
  }
};

// d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi); times dy.
struct GeluErfGrad {
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& dy, const Packet& x) const {
    using namespace Eigen::internal;
    Packet cdf = pmul(pset1<Packet>(0.5f), perfc(pmul(pset1<Packet>(kMinusSqrtHalf), x)));
    Packet xc = pmin(pmax(x, pset1<Packet>(-kPdfClamp)), pset1<Packet>(kPdfClamp));
    Packet pdf = pmul(pset1<Packet>(kInvSqrt2Pi), pexp(pmul(pset1<Packet>(-0.5f), pmul(xc, xc))));
    return pmul(dy, padd(cdf, pmul(xc, pdf)));
  }
};

using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int64_t kPacketSize = Eigen::internal::unpacket_traits<Packet>::size;
constexpr int64_t kChunk = 4096;  // elements per work item: a multiple of every packet size

// Runs fn(first, end) over fixed chunks of n elements on TensorFlow's CPU worker threads.
template <typename Fn>
void ForEachChunk(OpKernelContext* context, int64_t n, int64_t cost_per_chunk, Fn fn) {
  auto* workers = context->device()->tensorflow_cpu_worker_threads();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  tensorflow::Shard(workers->num_threads, workers->workers, chunks, cost_per_chunk, [&](int64_t first, int64_t end) {
    for (int64_t chunk = first; chunk < end; ++chunk) fn(chunk * kChunk, std::min(n, (chunk + 1) * kChunk));
  });
}

// out[i] = op.packetOp(inputs[0][i], ...) element-wise. Every element, the last ones included (through a
// padded packet), takes the same packet arithmetic whatever the thread split or the buffers' alignment,
// so results are bit-for-bit reproducible (checkpoint resume relies on it).
template <typename Op, typename... Inputs>
void Packetwise(OpKernelContext* context, int64_t n, const Op& op, float* out, const Inputs*... inputs) {
  using namespace Eigen::internal;
  ForEachChunk(context, n, 50 * kChunk, [&](int64_t i, int64_t stop) {
    for (; i + kPacketSize <= stop; i += kPacketSize) pstoreu(out + i, op.packetOp(ploadu<Packet>(inputs + i)...));
    if (i == stop) return;
    auto padded = [&](const float* input) {  // the tail of one input, zero-padded to a whole packet
      EIGEN_ALIGN_MAX float buffer[kPacketSize] = {};
      std::copy(input + i, input + stop, buffer);
      return pload<Packet>(buffer);
    };
    EIGEN_ALIGN_MAX float result[kPacketSize];
    pstore(result, op.packetOp(padded(inputs)...));
    std::copy(result, result + (stop - i), out + i);
  });
}

class GeluTanhOp : public OpKernel {
 public:
  explicit GeluTanhOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    Packetwise(context, x.NumElements(), GeluTanh(), y->flat<float>().data(), x.flat<float>().data());
  }
};

class GeluTanhGradOp : public OpKernel {
 public:
  explicit GeluTanhGradOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    OP_REQUIRES(context, dy.shape() == x.shape(),
                tensorflow::errors::InvalidArgument("BertGeluTanhGrad: dy has shape ", dy.shape().DebugString(),
                                                    " but x has shape ", x.shape().DebugString()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &dx));
    Packetwise(context, x.NumElements(), GeluTanhGrad(), dx->flat<float>().data(), dy.flat<float>().data(),
               x.flat<float>().data());
  }
};

class GeluErfOp : public OpKernel {
 public:
  explicit GeluErfOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    Packetwise(context, x.NumElements(), GeluErf(), y->flat<float>().data(), x.flat<float>().data());
  }
};

class GeluErfGradOp : public OpKernel {
 public:
  explicit GeluErfGradOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    OP_REQUIRES(context, dy.shape() == x.shape(),
                tensorflow::errors::InvalidArgument("BertGeluErfGrad: dy has shape ", dy.shape().DebugString(),
                                                    " but x has shape ", x.shape().DebugString()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &dx));
    Packetwise(context, x.NumElements(), GeluErfGrad(), dx->flat<float>().data(), dy.flat<float>().data(),
               x.flat<float>().data());
  }
};

constexpr int64_t kRowsPerBlock = 32;

// Sum of f(0) ... f(n-1) in a fixed order (8 lanes by index, then the lanes pairwise), so the
// result does not depend on the data's address or on how the compiler vectorises the loop.
template <typename F>
inline float FixedOrderSum(int64_t n, F f) {
  float lane[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += f(i + k);
  for (int k = 0; i < n; ++i, ++k) lane[k] += f(i);
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// Runs fn(first_row, end_row) over row ranges on TensorFlow's CPU worker threads.
template <typename Fn>
void ForEachRowRange(OpKernelContext* context, int64_t rows, int64_t cost_per_row, Fn fn) {
  auto* workers = context->device()->tensorflow_cpu_worker_threads();
  tensorflow::Shard(workers->num_threads, workers->workers, rows, cost_per_row, fn);
}

class LayerNormOp : public OpKernel {
 public:
  explicit LayerNormOp(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("epsilon", &epsilon_));
  }
  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& gamma = context->input(1);
    const Tensor& beta = context->input(2);
    OP_REQUIRES(context, x.dims() >= 1, tensorflow::errors::InvalidArgument("BertLayerNorm: x is a scalar"));
    const int64_t width = x.dim_size(x.dims() - 1);
    OP_REQUIRES(context, gamma.NumElements() == width && beta.NumElements() == width,
                tensorflow::errors::InvalidArgument("BertLayerNorm: gamma and beta need ", width,
                                                    " values (the last axis of x), got ", gamma.NumElements(),
                                                    " and ", beta.NumElements()));
    const int64_t rows = width ? x.NumElements() / width : 0;
    Tensor *y = nullptr, *mean = nullptr, *inv = nullptr;
    tensorflow::TensorShape row_shape({rows});
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(context, context->allocate_output(1, row_shape, &mean));
    OP_REQUIRES_OK(context, context->allocate_output(2, row_shape, &inv));
    const float* xs = x.flat<float>().data();
    const float* g = gamma.flat<float>().data();
    const float* b = beta.flat<float>().data();
    float* ys = y->flat<float>().data();
    float* means = mean->flat<float>().data();
    float* invs = inv->flat<float>().data();
    const float epsilon = epsilon_;
    ForEachRowRange(context, rows, 8 * width, [&](int64_t first, int64_t end) {
      for (int64_t r = first; r < end; ++r) {
        const float* row = xs + r * width;
        const float m = FixedOrderSum(width, [&](int64_t i) { return row[i]; }) / width;
        const float variance = FixedOrderSum(width, [&](int64_t i) { return (row[i] - m) * (row[i] - m); }) / width;
        const float scale = 1.f / std::sqrt(variance + epsilon);
        float* out = ys + r * width;
        for (int64_t i = 0; i < width; ++i) {
          const float gs = g[i] * scale;
          out[i] = row[i] * gs + (b[i] - m * gs);
        }
        means[r] = m;
        invs[r] = scale;
      }
    });
  }

 private:
  float epsilon_;
};

class LayerNormGradOp : public OpKernel {
 public:
  explicit LayerNormGradOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& dy = context->input(0);
    const Tensor& x = context->input(1);
    const Tensor& gamma = context->input(2);
    const Tensor& mean = context->input(3);
    const Tensor& inv = context->input(4);
    OP_REQUIRES(context, dy.shape() == x.shape(),
                tensorflow::errors::InvalidArgument("BertLayerNormGrad: dy has shape ", dy.shape().DebugString(),
                                                    " but x has shape ", x.shape().DebugString()));
    const int64_t width = x.dim_size(x.dims() - 1);
    const int64_t rows = width ? x.NumElements() / width : 0;
    OP_REQUIRES(context, gamma.NumElements() == width && mean.NumElements() == rows && inv.NumElements() == rows,
                tensorflow::errors::InvalidArgument("BertLayerNormGrad: gamma, mean or inv has the wrong size"));
    Tensor *dx = nullptr, *dgamma = nullptr, *dbeta = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &dx));
    OP_REQUIRES_OK(context, context->allocate_output(1, gamma.shape(), &dgamma));
    OP_REQUIRES_OK(context, context->allocate_output(2, gamma.shape(), &dbeta));
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    std::vector<float> partial_dgamma(blocks * width, 0.f), partial_dbeta(blocks * width, 0.f);
    const float* dys = dy.flat<float>().data();
    const float* xs = x.flat<float>().data();
    const float* g = gamma.flat<float>().data();
    const float* means = mean.flat<float>().data();
    const float* invs = inv.flat<float>().data();
    float* dxs = dx->flat<float>().data();
    ForEachRowRange(context, blocks, 16 * width * kRowsPerBlock, [&](int64_t first, int64_t end) {
      std::vector<float> normalised(width), scaled(width);
      for (int64_t block = first; block < end; ++block) {
        float* block_dgamma = partial_dgamma.data() + block * width;
        float* block_dbeta = partial_dbeta.data() + block * width;
        const int64_t last = std::min(rows, (block + 1) * kRowsPerBlock);
        for (int64_t r = block * kRowsPerBlock; r < last; ++r) {
          const float* d = dys + r * width;
          const float* row = xs + r * width;
          for (int64_t i = 0; i < width; ++i) {
            normalised[i] = (row[i] - means[r]) * invs[r];
            scaled[i] = d[i] * g[i];
          }
          // dx = inv * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat))
          const float mean_scaled = FixedOrderSum(width, [&](int64_t i) { return scaled[i]; }) / width;
          const float mean_projection =
              FixedOrderSum(width, [&](int64_t i) { return scaled[i] * normalised[i]; }) / width;
          float* out = dxs + r * width;
          for (int64_t i = 0; i < width; ++i) {
            out[i] = invs[r] * (scaled[i] - mean_scaled - normalised[i] * mean_projection);
            block_dgamma[i] += d[i] * normalised[i];
            block_dbeta[i] += d[i];
          }
        }
      }
    });
    float* total_dgamma = dgamma->flat<float>().data();
    float* total_dbeta = dbeta->flat<float>().data();
    std::fill(total_dgamma, total_dgamma + width, 0.f);
    std::fill(total_dbeta, total_dbeta + width, 0.f);
    for (int64_t block = 0; block < blocks; ++block) {
      for (int64_t i = 0; i < width; ++i) {
        total_dgamma[i] += partial_dgamma[block * width + i];
        total_dbeta[i] += partial_dbeta[block * width + i];
      }
    }
  }
};

}  // namespace

REGISTER_OP("BertLayerNorm")
    .Input("x: float")
    .Input("gamma: float")
    .Input("beta: float")
    .Output("y: float")
    .Output("mean: float")
    .Output("inv: float")
    .Attr("epsilon: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->UnknownShapeOfRank(1));
      c->set_output(2, c->UnknownShapeOfRank(1));
      return absl::OkStatus();
    })
    .Doc("LayerNorm over the last axis (the original's arithmetic); also the row means and 1/sqrt(var+eps).");
REGISTER_OP("BertLayerNormGrad")
    .Input("dy: float")
    .Input("x: float")
    .Input("gamma: float")
    .Input("mean: float")
    .Input("inv: float")
    .Output("dx: float")
    .Output("dgamma: float")
    .Output("dbeta: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->input(1));
      c->set_output(1, c->input(2));
      c->set_output(2, c->input(2));
      return absl::OkStatus();
    })
    .Doc("Gradients of BertLayerNorm with respect to x, gamma and beta.");
REGISTER_KERNEL_BUILDER(Name("BertLayerNorm").Device(DEVICE_CPU), LayerNormOp);
REGISTER_KERNEL_BUILDER(Name("BertLayerNormGrad").Device(DEVICE_CPU), LayerNormGradOp);

REGISTER_OP("BertGeluTanh")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("The original BERT's tanh-approximated GELU in one pass.");
REGISTER_OP("BertGeluTanhGrad")
    .Input("dy: float")
    .Input("x: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("dy times the derivative of BertGeluTanh at x, in one pass.");
REGISTER_KERNEL_BUILDER(Name("BertGeluTanh").Device(DEVICE_CPU), GeluTanhOp);
REGISTER_KERNEL_BUILDER(Name("BertGeluTanhGrad").Device(DEVICE_CPU), GeluTanhGradOp);

REGISTER_OP("BertGeluErf")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("The exact (erf) GELU, x Phi(x), in one pass.");
REGISTER_OP("BertGeluErfGrad")
    .Input("dy: float")
    .Input("x: float")
    .Output("dx: float")
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc("dy times the derivative of BertGeluErf at x, Phi(x) + x phi(x), in one pass.");
REGISTER_KERNEL_BUILDER(Name("BertGeluErf").Device(DEVICE_CPU), GeluErfOp);
REGISTER_KERNEL_BUILDER(Name("BertGeluErfGrad").Device(DEVICE_CPU), GeluErfGradOp);

}  // namespace bert_tf
