// TF glue: the Grappler custom graph optimizer behind tf_ucudnn.enable_rewrite().
//
// Registered as "UcudnnRewriter"; it runs when its name is in the rewriter
// config's custom_optimizers, after Grappler's built-in passes. It keeps each
// convolution's data_format: tf_ucudnn/rewrite.py turns Grappler's layout
// optimizer off while the rewrite covers a GPU, so NHWC models stay NHWC (run
// before or after this pass, that optimizer would make float32 training
// graphs NCHW, or transpose pooling and batch norm; docs/design.md). It replaces
// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter nodes (float, half,
// bfloat16) by the tf_ucudnn ops with the same attributes plus μ-cuDNN's
// knobs, and _FusedConv2D nodes that the remapper made of conv + BiasAdd
// [+ Relu | Relu6 | Elu | LeakyRelu | Tanh | Sigmoid] by Ucudnn>Conv2DWithBias
// (the bias, and a Relu, in the convolution's kernel where its cuDNN engine
// takes them) followed by the same activation node for the others. Other
// fused convolutions (batch-norm fusions, other filter formats) are left
// alone and counted.
//
// Parameters (parameter_map): workspace_limit (int, bytes; -1 = the op's
// default), total_workspace (int, bytes; -1 = the op's default, > 0 =
// Workspace Division among the kernels sharing it), batch_size_policy (string;
// "" = the op's default), devices (string: comma-separated device types or
// type:index, e.g. "GPU" or "GPU:1"; "" = every device).
#include <atomic>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tensorflow/core/framework/attr_value.pb.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/grappler/grappler_item.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer.h"
#include "tensorflow/core/grappler/optimizers/custom_graph_optimizer_registry.h"
#include "tensorflow/core/protobuf/rewriter_config.pb.h"

namespace tensorflow {
namespace ucudnn_tf {
namespace {

// Counters for tf_ucudnn.rewrite_stats() (ucudnn_rewrite_stats below).
std::atomic<int64_t> g_rewritten{0};        // conv and gradient nodes replaced
std::atomic<int64_t> g_fused_rewritten{0};  // _FusedConv2D nodes replaced
std::atomic<int64_t> g_fused_left{0};       // _FusedConv2D nodes left alone

const char* UcudnnOpFor(const std::string& op) {
  if (op == "Conv2D") return "Ucudnn>Conv2D";
  if (op == "Conv2DBackpropInput") return "Ucudnn>Conv2DBackpropInput";
  if (op == "Conv2DBackpropFilter") return "Ucudnn>Conv2DBackpropFilter";
  return nullptr;
}

bool SupportedType(const NodeDef& node) {
  auto it = node.attr().find("T");
  if (it == node.attr().end()) return false;
  const DataType t = it->second.type();
  return t == DT_FLOAT || t == DT_HALF || t == DT_BFLOAT16;
}

// "/job:localhost/replica:0/task:0/device:GPU:1" -> {"GPU", "1"}.
void ParseDevice(const std::string& name, std::string* type, std::string* index) {
  std::string last = name.substr(name.find_last_of('/') + 1);
  if (last.rfind("device:", 0) == 0) last = last.substr(7);
  const size_t colon = last.find(':');
  *type = last.substr(0, colon);
  *index = colon == std::string::npos ? "" : last.substr(colon + 1);
  for (char& c : *type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
}

class UcudnnRewriter : public grappler::CustomGraphOptimizer {
 public:
  std::string name() const override { return "UcudnnRewriter"; }
  bool UsesFunctionLibrary() const override { return false; }

  absl::Status Init(const RewriterConfig_CustomGraphOptimizer* config) override {
    if (config == nullptr) return absl::OkStatus();
    const auto& params = config->parameter_map();
    if (auto it = params.find("workspace_limit"); it != params.end()) {
      workspace_limit_ = it->second.i();
    }
    if (auto it = params.find("total_workspace"); it != params.end()) {
      total_workspace_ = it->second.i();
    }
    if (auto it = params.find("batch_size_policy"); it != params.end()) {
      policy_ = it->second.s();
    }
    if (auto it = params.find("devices"); it != params.end() && !it->second.s().empty()) {
      for (absl::string_view d : absl::StrSplit(it->second.s(), ',')) {
        std::string type, index;
        ParseDevice(std::string(d), &type, &index);
        devices_.push_back({type, index});
      }
    }
    return absl::OkStatus();
  }

  absl::Status Optimize(grappler::Cluster* /*cluster*/, const grappler::GrapplerItem& item,
                        GraphDef* optimized) override {
    *optimized = item.graph;
    std::vector<NodeDef> added;
    for (NodeDef& node : *optimized->mutable_node()) {
      if (!OnChosenDevice(node) || !SupportedType(node)) continue;
      if (const char* op = UcudnnOpFor(node.op())) {
        node.set_op(op);
        node.mutable_attr()->erase("use_cudnn_on_gpu");
        AddKnobs(&node);
        ++g_rewritten;
      } else if (node.op() == "_FusedConv2D") {
        if (RewriteFused(&node, &added)) {
          ++g_fused_rewritten;
        } else {
          ++g_fused_left;
        }
      }
    }
    for (NodeDef& node : added) *optimized->add_node() = std::move(node);
    return absl::OkStatus();
  }

 private:
  struct DeviceFilter {
    std::string type, index;  // index "" = any
  };

  bool OnChosenDevice(const NodeDef& node) const {
    if (devices_.empty()) return true;
    if (node.device().empty()) return false;  // unplaced: only when unrestricted
    std::string type, index;
    ParseDevice(node.device(), &type, &index);
    for (const DeviceFilter& d : devices_) {
      if (d.type == type && (d.index.empty() || d.index == index)) return true;
    }
    return false;
  }

  void AddKnobs(NodeDef* node) const {
    auto& attr = *node->mutable_attr();
    attr["workspace_limit"].set_i(workspace_limit_);
    attr["total_workspace"].set_i(total_workspace_);
    attr["batch_size_policy"].set_s(policy_);
    attr["micro_batch_size"].set_i(0);
  }

  // _FusedConv2D(input, filter, bias) with fused_ops [BiasAdd] or [BiasAdd,
  // Relu] -> Ucudnn>Conv2DWithBias (activation "linear" or "relu"); [BiasAdd,
  // another activation] -> Ucudnn>Conv2DWithBias -> activation. The last node
  // keeps the fused node's name so its consumers are unchanged.
  bool RewriteFused(NodeDef* node, std::vector<NodeDef>* added) const {
    const auto& attr = node->attr();
    auto get = [&](const char* name) -> const AttrValue* {
      auto it = attr.find(name);
      return it == attr.end() ? nullptr : &it->second;
    };
    const AttrValue* fused_ops = get("fused_ops");
    const AttrValue* num_args = get("num_args");
    const AttrValue* num_host_args = get("num_host_args");
    const AttrValue* filter_format = get("filter_format");
    if (fused_ops == nullptr || num_args == nullptr || num_args->i() != 1) return false;
    if (num_host_args != nullptr && num_host_args->i() != 0) return false;
    if (filter_format != nullptr && !filter_format->s().empty() && filter_format->s() != "HWIO") {
      return false;
    }
    const auto& ops = fused_ops->list().s();
    if (ops.empty() || ops.size() > 2 || ops[0] != "BiasAdd") return false;
    std::string activation = ops.size() == 2 ? ops[1] : "";
    if (!activation.empty() && activation != "Relu" && activation != "Relu6" &&
        activation != "Elu" && activation != "LeakyRelu" && activation != "Tanh" &&
        activation != "Sigmoid") {
      return false;
    }
    std::vector<std::string> data_inputs, control_inputs;
    for (const std::string& in : node->input()) {
      (in.rfind("^", 0) == 0 ? control_inputs : data_inputs).push_back(in);
    }
    if (data_inputs.size() != 3) return false;

    const std::string name = node->name();
    const DataType t = attr.at("T").type();
    const bool fused_relu = activation == "Relu";
    if (fused_relu) activation.clear();
    NodeDef conv;
    conv.set_name(activation.empty() ? name : absl::StrCat(name, "/ucudnn_conv"));
    conv.set_op("Ucudnn>Conv2DWithBias");
    conv.set_device(node->device());
    for (const std::string& in : data_inputs) conv.add_input(in);
    for (const std::string& c : control_inputs) conv.add_input(c);
    for (const char* a : {"T", "strides", "padding", "explicit_paddings", "data_format",
                          "dilations"}) {
      if (const AttrValue* v = get(a)) (*conv.mutable_attr())[a] = *v;
    }
    AddKnobs(&conv);
    (*conv.mutable_attr())["activation"].set_s(fused_relu ? "relu" : "linear");
    if (activation.empty()) {
      *node = std::move(conv);  // in place
      return true;
    }
    NodeDef act;
    act.set_name(name);
    act.set_op(activation);
    act.set_device(node->device());
    act.add_input(conv.name());
    (*act.mutable_attr())["T"].set_type(t);
    if (activation == "LeakyRelu") {
      if (const AttrValue* v = get("leakyrelu_alpha")) (*act.mutable_attr())["alpha"] = *v;
    }
    // The fused node becomes the activation, in place.
    added->push_back(std::move(conv));
    *node = std::move(act);
    return true;
  }

  int64_t workspace_limit_ = -1;
  int64_t total_workspace_ = -1;
  std::string policy_;
  std::vector<DeviceFilter> devices_;
};

REGISTER_GRAPH_OPTIMIZER_AS(UcudnnRewriter, "UcudnnRewriter");

}  // namespace
}  // namespace ucudnn_tf
}  // namespace tensorflow

extern "C" {

// The rewriter's counters since the library loaded: nodes replaced, fused
// nodes split and replaced, fused nodes left alone.
void ucudnn_rewrite_stats(int64_t* rewritten, int64_t* fused_rewritten, int64_t* fused_left) {
  *rewritten = tensorflow::ucudnn_tf::g_rewritten.load();
  *fused_rewritten = tensorflow::ucudnn_tf::g_fused_rewritten.load();
  *fused_left = tensorflow::ucudnn_tf::g_fused_left.load();
}

}  // extern "C"
