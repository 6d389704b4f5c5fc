// Writes the fuzz seed corpus from the real fixtures in tests/testdata:
//   fuzz_make_seeds OUT_DIR   ->  OUT_DIR/{trace,kineto,predict}/seed_*
// Seeds are shrunk copies (a few operations, a short window of events) so
// the fuzzer mutates small inputs that still reach deep into the code.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/json_text.h"
#include "common/status_macros.h"
#include "core/kineto/kineto_import.h"
#include "core/trace/trace_id.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "habitat/v1/prediction_service.pb.h"
#include "habitat/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

using nlohmann::json;

const std::string kTestdata = HABITAT_TESTDATA_DIR;
const std::string kData = HABITAT_DATA_DIR;

// `name` under tests/testdata/agent/h100/, or a path under tests/testdata.
absl::StatusOr<v1::Trace> LoadAgentTrace(const std::string& name) {
  const std::string path = absl::StrContains(name, "/")
                               ? kTestdata + "/" + name + ".trace.gz"
                               : kTestdata + "/agent/h100/" + name + ".trace.gz";
  HABITAT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  v1::Trace trace;
  if (!trace.ParseFromString(bytes)) return absl::DataLossError(name + " is not a Trace");
  return trace;
}

// Keeps operations [first, first + count), at most `kernels` kernels per
// pass, and a few trace-level entries.
v1::Trace Shrink(const v1::Trace& trace, int first, int count, int kernels) {
  v1::Trace out = trace;
  out.clear_operations();
  for (int i = first; i < std::min(first + count, trace.operations_size()); ++i) {
    v1::Operation* op = out.add_operations();
    *op = trace.operations(i);
    for (v1::Pass* pass : {op->mutable_forward(), op->mutable_backward()}) {
      if (pass->kernels_size() > kernels) {
        pass->mutable_kernels()->DeleteSubrange(kernels, pass->kernels_size() - kernels);
      }
    }
    if (!trace.operations(i).has_backward()) op->clear_backward();
  }
  if (out.unattributed_kernels_size() > 2) {
    out.mutable_unattributed_kernels()->DeleteSubrange(2, out.unattributed_kernels_size() - 2);
  }
  if (out.host_events_size() > 3) {
    out.mutable_host_events()->DeleteSubrange(3, out.host_events_size() - 3);
  }
  return out;
}

// Keeps the operations at the ascending indices `keep`, at most `kernels`
// kernels per pass, and what links operations: gradient producers and the
// memory records, renumbered (dropped where they name an operation not
// kept), so the result is as valid as the trace.
v1::Trace ShrinkLinked(const v1::Trace& trace, const std::vector<int>& keep, int kernels) {
  v1::Trace out = Shrink(trace, 0, 0, kernels);
  std::vector<int> renumbered(trace.operations_size(), -1);
  for (const int i : keep) {
    renumbered[i] = out.operations_size();
    *out.add_operations() = Shrink(trace, i, 1, kernels).operations(0);
  }
  for (v1::Operation& op : *out.mutable_operations()) {
    if (!op.has_gradient_producer()) continue;
    const int producer = renumbered[op.gradient_producer()];
    if (producer < 0) {
      op.clear_gradient_producer();
    } else {
      op.set_gradient_producer(producer);
    }
  }
  if (out.has_memory()) {
    v1::MemoryUsage* memory = out.mutable_memory();
    memory->clear_passes();
    for (const v1::PassMemory& pass : trace.memory().passes()) {
      if (renumbered[pass.operation()] < 0) continue;
      v1::PassMemory* kept = memory->add_passes();
      *kept = pass;
      kept->set_operation(renumbered[pass.operation()]);
    }
  }
  return out;
}

// First operation index with a backward pass of its own (an autograd node
// the importer could not link), or the middle.
int FirstBackwardOp(const v1::Trace& trace) {
  for (int i = 0; i < trace.operations_size(); ++i) {
    if (trace.operations(i).has_backward() && trace.operations(i).backward().kernels_size() > 0) {
      return i;
    }
  }
  return trace.operations_size() / 2;
}

bool IsHostCategory(const std::string& cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "cuda_runtime" ||
         cat == "cuda_driver";
}

// A Kineto document with the fixture's header, its last ProfilerStep
// annotation and `count` host events starting at the first one for which
// `start_at` holds, plus the GPU activities those events launched.
json Excerpt(const json& doc, int count, bool (*start_at)(const json&)) {
  json out = doc;
  out["traceEvents"] = json::array();
  const json& events = doc.at("traceEvents");
  // The step holding the most host events (the fixtures keep the events of
  // one step, and the annotations of all).
  const json* step = nullptr;
  size_t step_events = 0;
  for (const json& e : events) {
    if (e.value("cat", "") != "user_annotation" ||
        !absl::StartsWith(e.value("name", ""), "ProfilerStep#")) {
      continue;
    }
    const double start = e.at("ts").get<double>();
    const double end = start + e.at("dur").get<double>();
    const size_t inside = std::count_if(events.begin(), events.end(), [&](const json& h) {
      return h.value("cat", "") == "cpu_op" && h.at("ts").get<double>() >= start &&
             h.at("ts").get<double>() <= end;
    });
    if (step == nullptr || inside > step_events) {
      step = &e;
      step_events = inside;
    }
  }
  if (step == nullptr) return out;
  const double step_start = step->at("ts").get<double>();
  const double step_end = step_start + step->at("dur").get<double>();
  std::vector<const json*> host;
  for (const json& e : events) {
    if (e.value("ph", "") != "X" || !IsHostCategory(e.value("cat", "")) || &e == step) continue;
    const double ts = e.at("ts").get<double>();
    if (ts >= step_start && ts <= step_end) host.push_back(&e);
  }
  std::stable_sort(host.begin(), host.end(), [](const json* a, const json* b) {
    return a->at("ts").get<double>() < b->at("ts").get<double>();
  });
  size_t first = 0;
  while (first < host.size() && !start_at(*host[first])) ++first;
  out["traceEvents"].push_back(*step);
  std::vector<int64_t> correlations;
  for (size_t i = first; i < std::min(host.size(), first + count); ++i) {
    out["traceEvents"].push_back(*host[i]);
    const json& args = host[i]->value("args", json::object());
    if (args.contains("correlation")) correlations.push_back(args["correlation"].get<int64_t>());
  }
  std::sort(correlations.begin(), correlations.end());
  for (const json& e : events) {
    const std::string cat = e.value("cat", "");
    if (e.value("ph", "") != "X" ||
        (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset")) {
      continue;
    }
    const json& args = e.value("args", json::object());
    if (args.contains("correlation") && std::binary_search(correlations.begin(), correlations.end(),
                                                           args["correlation"].get<int64_t>())) {
      out["traceEvents"].push_back(e);
    }
  }
  return out;
}

bool AnyEvent(const json&) { return true; }
bool BackwardNode(const json& e) {
  return absl::StartsWith(e.value("name", ""), "autograd::engine::evaluate_function: ");
}

absl::Status Write(const std::string& path, const std::string& bytes) {
  HABITAT_RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  return absl::OkStatus();
}

// Map fields (Trace.metadata) serialize in hash order unless asked not to;
// deterministic bytes make the corpus reproducible.
std::string Serialize(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

absl::Status WriteTrace(const std::string& path, const v1::Trace& trace) {
  return Write(path, Serialize(trace));
}

absl::Status Run(const std::string& out) {
  for (const char* dir : {"trace", "kineto", "predict"}) {
    std::error_code error;
    std::filesystem::create_directories(out + "/" + dir, error);
    if (error) return absl::InternalError(out + "/" + dir + ": " + error.message());
  }
  HABITAT_ASSIGN_OR_RETURN(v1::Trace smallcnn, LoadAgentTrace("smallcnn_b8_fp32"));
  HABITAT_ASSIGN_OR_RETURN(v1::Trace resnet, LoadAgentTrace("resnet50_b16_fp32"));

  // trace/: agent traces and imported Kineto traces, shrunk.
  HABITAT_RETURN_IF_ERROR(WriteTrace(out + "/trace/seed_agent_smallcnn", smallcnn));
  HABITAT_RETURN_IF_ERROR(
      WriteTrace(out + "/trace/seed_agent_resnet50_head", Shrink(resnet, 0, 6, 3)));
  // Agent traces link backward passes to their forward operations.
  HABITAT_RETURN_IF_ERROR(WriteTrace(out + "/trace/seed_agent_resnet50_middle",
                                     Shrink(resnet, resnet.operations_size() / 2, 6, 3)));

  std::vector<v1::Trace> imported;
  struct Fixture {
    const char* gpu;
    const char* name;
    uint32_t batch;
    v1::Precision precision;
  };
  const Fixture fixtures[] = {
      {"h100", "dcgan_b64_fp32", 64, v1::PRECISION_FP32},
      {"h200", "gnmt_b32_fp32", 32, v1::PRECISION_FP32},
      {"h100", "transformer_b32_bf16", 32, v1::PRECISION_BF16},
      {"h200", "inception_v3_b16_fp32", 16, v1::PRECISION_FP32},
  };
  for (const Fixture& f : fixtures) {
    const std::string stem = std::string(f.gpu) + "_" + f.name;
    HABITAT_ASSIGN_OR_RETURN(std::string text,
                             ReadFile(kTestdata + "/kineto/" + f.gpu + "/" + f.name + ".json.gz"));
    KinetoImportOptions options;
    options.model_name = f.name;
    options.batch_size = f.batch;
    options.precision = f.precision;
    HABITAT_ASSIGN_OR_RETURN(v1::Trace trace, ImportKinetoTrace(text, options));
    HABITAT_RETURN_IF_ERROR(WriteTrace(out + "/trace/seed_kineto_" + stem, Shrink(trace, 0, 5, 2)));
    imported.push_back(Shrink(trace, FirstBackwardOp(trace), 4, 2));

    // kineto/: a forward and a backward excerpt of the document.
    const json doc = json::parse(text);
    const std::pair<const char*, bool (*)(const json&)> excerpts[] = {{"forward", AnyEvent},
                                                                      {"backward", BackwardNode}};
    for (const auto& [label, start_at] : excerpts) {
      const std::string excerpt = Excerpt(doc, 30, start_at).dump();
      absl::StatusOr<v1::Trace> check = ImportKinetoTrace(excerpt, options);
      if (!check.ok()) {
        std::printf("note: %s %s excerpt does not import: %s\n", stem.c_str(), label,
                    std::string(check.status().message()).c_str());
      }
      HABITAT_RETURN_IF_ERROR(Write(out + "/kineto/seed_" + stem + "_" + label + ".json", excerpt));
      if (&f == &fixtures[0] && start_at == AnyEvent) {
        // As a Windows editor saves it: with a UTF-8 byte order mark.
        HABITAT_RETURN_IF_ERROR(Write(out + "/kineto/seed_" + stem + "_" + label + "_bom.json",
                                      absl::StrCat(kUtf8Bom, excerpt)));
      }
    }
  }

  // predict/: requests by id of the traces the fuzz target uploads, and
  // inline traces.
  HABITAT_ASSIGN_OR_RETURN(std::string resnet_id, ComputeTraceId(resnet));
  HABITAT_ASSIGN_OR_RETURN(std::string smallcnn_id, ComputeTraceId(smallcnn));
  v1::PredictRequest request;
  request.set_trace_id(resnet_id);
  request.set_catalog("aws");
  HABITAT_RETURN_IF_ERROR(Write(out + "/predict/seed_id_resnet50_aws", Serialize(request)));

  request.Clear();
  request.set_trace_id(smallcnn_id);
  for (const char* device : {"H100-SXM", "A100-SXM-40GB", "T4", "H200"})
    request.add_devices(device);
  request.set_catalog("gcp");
  request.set_price_kind(v1::PRICE_KIND_SPOT);
  request.set_include_breakdown(true);
  HABITAT_RETURN_IF_ERROR(Write(out + "/predict/seed_id_smallcnn_breakdown", Serialize(request)));

  // Target host speeds: the range's edges, and values once accepted that
  // replayed to 80 years through an overflow (1e-12) or silently fell back
  // to the GPU time (1e-300).
  for (const auto& [label, speed] : std::vector<std::pair<std::string, double>>{
           {"min", 0.01}, {"max", 100.0}, {"1e-12", 1e-12}, {"1e-300", 1e-300}}) {
    request.Clear();
    request.set_trace_id(smallcnn_id);
    request.add_devices("H100-SXM");
    request.add_devices("T4");
    request.set_target_host_speed(speed);
    HABITAT_RETURN_IF_ERROR(
        Write(out + "/predict/seed_id_smallcnn_host_speed_" + label, Serialize(request)));
  }

  // Other batch sizes: half, 256 times (the largest scale) and 10^9.
  for (const uint32_t factor_label : {0u, 1u, 2u}) {
    const uint32_t batch = factor_label == 0   ? std::max(1u, smallcnn.batch_size() / 2)
                           : factor_label == 1 ? smallcnn.batch_size() * 256
                                               : 1000000000u;
    request.Clear();
    request.set_trace_id(smallcnn_id);
    request.add_devices("H100-SXM");
    request.add_devices("T4");
    request.set_batch_size(batch);
    HABITAT_RETURN_IF_ERROR(
        Write(absl::StrCat(out, "/predict/seed_id_smallcnn_batch_", batch), Serialize(request)));
  }

  request.Clear();
  *request.mutable_trace() = smallcnn;
  // Inline catalog: the first prices of the bundled GCP catalog.
  HABITAT_ASSIGN_OR_RETURN(std::string gcp_text, ReadFile(kData + "/catalogs/gcp.textproto"));
  v1::PriceCatalog* catalog = request.mutable_inline_catalog();
  if (!google::protobuf::TextFormat::ParseFromString(gcp_text, catalog)) {
    return absl::InvalidArgumentError("data/catalogs/gcp.textproto does not parse");
  }
  catalog->clear_source();
  catalog->mutable_prices()->DeleteSubrange(2, catalog->prices_size() - 2);
  for (const auto& p : catalog->prices()) request.add_devices(p.device_id());
  HABITAT_RETURN_IF_ERROR(Write(out + "/predict/seed_inline_smallcnn_catalog", Serialize(request)));

  for (size_t i = 0; i < imported.size(); ++i) {
    request.Clear();
    *request.mutable_trace() = imported[i];
    request.set_include_breakdown(i % 2 == 0);
    if (i % 2 == 1) request.set_catalog("lambda");
    HABITAT_RETURN_IF_ERROR(
        Write(out + "/predict/seed_inline_kineto_" + std::to_string(i), Serialize(request)));
  }

  // Memory prediction, --fit and data-parallel (DDP) steps need a trace
  // with Trace.memory and gradient producers: the DCGAN agent capture of
  // agent_suite/h100_producers (which fuzz_predict uploads), by id, and
  // shrunk inline (the discriminator's forward, its AccumulateGrads and the
  // optimizer's first ops), so mutations reach the memory records and the
  // producers too.
  HABITAT_ASSIGN_OR_RETURN(v1::Trace dcgan,
                           LoadAgentTrace("agent_suite/h100_producers/dcgan_b64_fp32"));
  if (!dcgan.has_memory() || dcgan.memory().passes().empty()) {
    return absl::FailedPreconditionError("the DCGAN producers fixture has no memory records");
  }
  HABITAT_ASSIGN_OR_RETURN(std::string dcgan_id, ComputeTraceId(dcgan));
  std::vector<int> keep;
  for (int i = 0; i <= 28; ++i) keep.push_back(i);   // forward, AccumulateGrads
  for (int i = 82; i <= 85; ++i) keep.push_back(i);  // _foreach_ optimizer ops
  const v1::Trace dcgan_small = ShrinkLinked(dcgan, keep, 2);
  const auto dcgan_request = [&](bool inline_trace) {
    request.Clear();
    if (inline_trace) {
      *request.mutable_trace() = dcgan_small;
    } else {
      request.set_trace_id(dcgan_id);
    }
  };
  // Memory at twice the traced batch on GPUs of 16 to 80 GB.
  for (const bool inline_trace : {false, true}) {
    dcgan_request(inline_trace);
    for (const char* device : {"H100-SXM", "A100-SXM-40GB", "T4", "L4"})
      request.add_devices(device);
    request.set_batch_size(dcgan.batch_size() * 2);
    HABITAT_RETURN_IF_ERROR(
        Write(absl::StrCat(out, "/predict/seed_", inline_trace ? "inline" : "id", "_dcgan_memory"),
              Serialize(request)));
  }
  // --fit: powers of two, and multiples of 48 (not a power of two).
  for (const uint32_t step : {0u, 48u}) {
    dcgan_request(false);
    for (const char* device : {"H100-SXM", "A10G", "T4"}) request.add_devices(device);
    request.mutable_fit()->set_batch_step(step);
    request.set_catalog("aws");
    HABITAT_RETURN_IF_ERROR(
        Write(absl::StrCat(out, "/predict/seed_id_dcgan_fit", step == 0 ? "" : "_step48"),
              Serialize(request)));
  }
  // DDP: one 8-GPU node, and two 4-GPU nodes with a 1 MiB bucket cap and
  // NVLink SHARP off (aws prices, which have network figures).
  for (const bool inline_trace : {false, true}) {
    dcgan_request(inline_trace);
    for (const char* device : {"H100-SXM", "A100-SXM-40GB"}) request.add_devices(device);
    request.set_catalog("aws");
    request.add_parallel()->set_gpus_per_node(8);
    v1::ParallelConfig* two_nodes = request.add_parallel();
    two_nodes->set_gpus_per_node(4);
    two_nodes->set_nodes(2);
    two_nodes->set_bucket_cap_bytes(int64_t{1} << 20);
    two_nodes->set_disable_nvls(true);
    HABITAT_RETURN_IF_ERROR(
        Write(absl::StrCat(out, "/predict/seed_", inline_trace ? "inline" : "id", "_dcgan_ddp"),
              Serialize(request)));
  }
  // All together: fit, DDP and the catalog's other instance sizes.
  dcgan_request(false);
  for (const char* device : {"H100-SXM", "T4"}) request.add_devices(device);
  request.set_catalog("aws");
  request.mutable_fit();
  request.add_parallel()->set_gpus_per_node(2);
  request.set_catalog_instances(true);
  HABITAT_RETURN_IF_ERROR(
      Write(out + "/predict/seed_id_dcgan_fit_ddp_instances", Serialize(request)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace habitat

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR (writes OUT_DIR/{trace,kineto,predict})\n", argv[0]);
    return 2;
  }
  const absl::Status status = habitat::Run(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
