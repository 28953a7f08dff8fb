// bert_tf's fused CPU kernels for TensorFlow, compiled on first use by bert_tf/custom_ops.py.
//
// BertGeluTanh / BertGeluTanhGrad: the original BERT's GELU, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))),
// and its derivative, each in one vectorised pass. TensorFlow runs the same formula as ~8 element-wise
// kernels forward and ~8 backward when training (its matmul fusion of GELU applies to inference only);
// these two take about a fifth of that time. Float32 only; tanh is Eigen's, as in TensorFlow's Tanh op.
#define EIGEN_USE_THREADS
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace bert_tf {
namespace {

using tensorflow::DEVICE_CPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using CPUDevice = Eigen::ThreadPoolDevice;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

struct GeluTanh {
  EIGEN_STRONG_INLINE float operator()(const float& x) const {
    return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * x * (1.f + kCubic * x * x)));
  }
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
  EIGEN_STRONG_INLINE float operator()(const float& dy, const float& x) const {
    float x2 = x * x;
    float t = std::tanh(kSqrt2OverPi * x * (1.f + kCubic * x2));
    float slope = kSqrt2OverPi * (1.f + 3.f * kCubic * x2);
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * slope);
  }
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

}  // namespace
}  // namespace bert_tf

namespace Eigen {
namespace internal {
template <>
struct functor_traits<bert_tf::GeluTanh> {
  enum { Cost = 8 * NumTraits<float>::MulCost + functor_traits<scalar_tanh_op<float>>::Cost, PacketAccess = true };
};
template <>
struct functor_traits<bert_tf::GeluTanhGrad> {
  enum { Cost = 14 * NumTraits<float>::MulCost + functor_traits<scalar_tanh_op<float>>::Cost, PacketAccess = true };
};
}  // namespace internal
}  // namespace Eigen

namespace bert_tf {
namespace {

class GeluTanhOp : public OpKernel {
 public:
  explicit GeluTanhOp(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    Tensor* y = nullptr;
    OP_REQUIRES_OK(context, context->forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    y->flat<float>().device(context->eigen_device<CPUDevice>()) = x.flat<float>().unaryExpr(GeluTanh());
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
    dx->flat<float>().device(context->eigen_device<CPUDevice>()) =
        dy.flat<float>().binaryExpr(x.flat<float>(), GeluTanhGrad());
  }
};

}  // namespace

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

}  // namespace bert_tf
