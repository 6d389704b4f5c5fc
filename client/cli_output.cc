#include "client/cli_output.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_text.h"
#include "core/pricing/price_catalog.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace habitat {
namespace {

using v1::DevicePrediction;
using v1::PredictResponse;

// RFC 4180: quote fields holding a comma, quote or line break.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

}  // namespace

const char* PriceKindName(v1::PriceKind kind) {
  return kind == v1::PRICE_KIND_SPOT ? "spot" : "on-demand";
}

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --format '", text, "'; expected table, json or csv"));
}

std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

// Of the origin GPU time, as the response's warning about the same
// operations says it.
double UnscaledPercent(const DevicePrediction& prediction) {
  double unscaled = 0, origin = 0;
  for (const auto& total : prediction.method_totals()) {
    origin += static_cast<double>(total.origin_ns());
    if (total.method() == v1::PREDICTION_METHOD_UNSCALED) {
      unscaled += static_cast<double>(total.origin_ns());
    }
  }
  return origin > 0 ? 100.0 * unscaled / origin : 0.0;
}

const char* PredictionCsvHeader() {
  return "rank_by_time,device_id,display_name,is_origin,gpu_time_ms,wall_time_ms,"
         "wall_time_is_gpu_time,samples_per_second,"
         "catalog,currency,price_kind,has_price,price_per_gpu_hour,cost_per_1000_samples,"
         "samples_per_currency_unit,rank_by_cost,unscaled_percent,warnings,wall_ms,gpu_busy_ms,"
         "host_bound,expected_error_percent,instance_type,gpus_per_instance,"
         "instance_description,price_region,batch_size,peak_allocated_bytes,"
         "memory_expected_error_percent,usable_memory_bytes,fits_memory,largest_fitting_batch";
}

std::string FormatPredictionCsv(const PredictResponse& response) {
  std::string out = absl::StrCat(PredictionCsvHeader(), "\n");
  for (const auto* p : TableOrder(response)) {
    const bool replayed = !p->wall_time_is_gpu_time();
    std::vector<std::string> fields = {
        absl::StrCat(p->rank_by_time()),
        CsvField(p->device_id()),
        CsvField(p->display_name()),
        p->is_origin() ? "true" : "false",
        absl::StrFormat("%.6f", static_cast<double>(p->gpu_time_ns()) / 1e6),
        absl::StrFormat("%.6f", static_cast<double>(p->wall_time_ns()) / 1e6),
        p->wall_time_is_gpu_time() ? "true" : "false",
        absl::StrFormat("%.3f", p->samples_per_second()),
        CsvField(response.catalog()),
        CsvField(response.currency()),
        PriceKindName(response.price_kind()),
        p->has_price() ? "true" : "false",
        // %g: costs per sample span many orders of magnitude.
        p->has_price() ? absl::StrFormat("%.9g", p->price_per_hour()) : "",
        p->has_price() ? absl::StrFormat("%.9g", p->cost_per_1000_samples()) : "",
        p->has_price() ? absl::StrFormat("%.9g", p->samples_per_currency_unit()) : "",
        p->has_price() ? absl::StrCat(p->rank_by_cost()) : "",
        absl::StrFormat("%.3f", UnscaledPercent(*p)),
        CsvField(absl::StrJoin(p->warnings(), "; ")),
        // Empty when the trace had no host timeline to replay. wall_ms is
        // deprecated: wall_time_ms where wall_time_is_gpu_time is false.
        replayed ? absl::StrFormat("%.6f", static_cast<double>(p->wall_time_ns()) / 1e6) : "",
        replayed ? absl::StrFormat("%.6f", static_cast<double>(p->gpu_busy_ns()) / 1e6) : "",
        replayed ? (p->host_bound() ? "true" : "false") : "",
        absl::StrFormat("%.3f", p->expected_error_percent()),
        CsvField(p->instance_type()),
        p->has_price() ? absl::StrCat(p->gpus_per_instance()) : "",
        CsvField(p->instance_description()),
        CsvField(p->price_region()),
        absl::StrCat(p->batch_size()),
    };
    // Empty when the trace recorded no memory.
    const bool m = p->has_memory();
    fields.push_back(m ? absl::StrCat(p->memory().peak_allocated_bytes()) : "");
    fields.push_back(m ? absl::StrFormat("%.3f", p->memory().expected_error_percent()) : "");
    fields.push_back(m ? absl::StrCat(p->memory().usable_bytes()) : "");
    fields.push_back(m ? (p->memory().fits() ? "true" : "false") : "");
    fields.push_back(m ? absl::StrCat(p->memory().largest_fitting_batch()) : "");
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

namespace {

// The proto JSON mapping prints 64-bit integers as strings (JavaScript
// numbers lose precision past 2^53); people pipe this output to jq, pandas
// and scripts that expect numbers, and our nanosecond values stay far
// below 2^53. `json` is `descriptor`'s message as printed with proto field
// names.
void IntegersAsNumbers(const google::protobuf::Descriptor& descriptor,
                       nlohmann::ordered_json* json) {
  using google::protobuf::FieldDescriptor;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    auto it = json->find(field.name());
    if (it == json->end()) continue;
    auto convert = [&field](nlohmann::ordered_json* value) {
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (value->is_object()) IntegersAsNumbers(*field.message_type(), value);
      } else if (value->is_string() && field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
        *value = std::stoll(value->get<std::string>());
      } else if (value->is_string() && field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64) {
        *value = std::stoull(value->get<std::string>());
      }
    };
    if (field.is_repeated() && it->is_array()) {
      for (auto& element : *it) convert(&element);
    } else {
      convert(&*it);
    }
  }
}

}  // namespace

absl::StatusOr<std::string> FormatJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(json, nullptr, false);
  if (parsed.is_discarded()) return absl::InternalError("cannot re-read the printed JSON");
  IntegersAsNumbers(*message.GetDescriptor(), &parsed);
  return parsed.dump(1) + "\n";
}

std::string FormatDevicesTable(const v1::ListDevicesResponse& response) {
  std::string out = absl::StrFormat("%-16s %-28s %-12s %4s %4s %5s %6s %7s %7s\n", "id", "name",
                                    "arch", "cc", "SMs", "GiB", "GB/s", "fp32 TF", "bf16 TF");
  for (const auto& d : response.devices()) {
    out += absl::StrFormat(
        "%-16s %-28s %-12s %4s %4d %5.0f %6.0f %7.1f %7.1f\n", Truncate(Printable(d.id()), 16),
        Truncate(Printable(d.display_name()), 28), Truncate(Printable(d.architecture()), 12),
        absl::StrCat(d.compute_capability_major(), ".", d.compute_capability_minor()), d.sm_count(),
        static_cast<double>(d.memory_bytes()) / (1024.0 * 1024 * 1024), d.memory_bandwidth_gbps(),
        d.peak_fp32_tflops(), d.peak_bf16_tensor_tflops());
  }
  absl::StrAppend(&out, response.devices_size(), " GPUs\n");
  return out;
}

std::string FormatDevicesCsv(const v1::ListDevicesResponse& response) {
  std::string out =
      "id,display_name,architecture,compute_capability,sm_count,memory_bytes,"
      "memory_bandwidth_gbps,peak_fp32_tflops,peak_tf32_tflops,peak_fp16_tensor_tflops,"
      "peak_bf16_tensor_tflops,test_only\n";
  for (const auto& d : response.devices()) {
    absl::StrAppend(
        &out,
        absl::StrJoin(
            std::vector<std::string>{
                CsvField(d.id()), CsvField(d.display_name()), CsvField(d.architecture()),
                absl::StrCat(d.compute_capability_major(), ".", d.compute_capability_minor()),
                absl::StrCat(d.sm_count()), absl::StrCat(d.memory_bytes()),
                absl::StrCat(d.memory_bandwidth_gbps()), absl::StrCat(d.peak_fp32_tflops()),
                absl::StrCat(d.peak_tf32_tflops()), absl::StrCat(d.peak_fp16_tensor_tflops()),
                absl::StrCat(d.peak_bf16_tensor_tflops()), d.test_only() ? "true" : "false"},
            ","),
        "\n");
  }
  return out;
}

std::string FormatCatalogsTable(const v1::ListCatalogsResponse& response) {
  std::string out;
  for (const auto& c : response.catalogs()) {
    absl::StrAppend(&out, "catalog ", Printable(c.name()), " (", Printable(c.provider()), ", ",
                    Printable(c.currency()), ", retrieved ", Printable(c.retrieved()), ")\n");
    if (!c.source().empty()) out += Wrap("  source: ", Printable(c.source()), 96);
    out += absl::StrFormat("  %-16s %-26s %4s %-14s %10s %10s\n", "GPU", "instance", "GPUs",
                           "region", "on-demand", "spot");
    for (const auto& p : c.prices()) {
      out += absl::StrFormat(
          "  %-16s %-26s %4d %-14s %10.3f %10s\n", Truncate(Printable(p.device_id()), 16),
          Truncate(Printable(p.instance_type()), 26), GpusPerInstance(p),
          Truncate(Printable(p.region()), 14), p.on_demand_per_gpu_hour(),
          p.spot_per_gpu_hour() > 0 ? absl::StrFormat("%.3f", p.spot_per_gpu_hour()) : "-");
    }
    out += "\n";
  }
  absl::StrAppend(&out, response.catalogs_size(), " catalogs; prices per GPU-hour\n");
  return out;
}

std::string FormatCatalogsCsv(const v1::ListCatalogsResponse& response) {
  std::string out =
      "catalog,provider,currency,retrieved,device_id,instance_type,gpus_per_instance,"
      "instance_description,region,on_demand_per_gpu_hour,spot_per_gpu_hour\n";
  for (const auto& c : response.catalogs()) {
    for (const auto& p : c.prices()) {
      absl::StrAppend(
          &out,
          absl::StrJoin(
              std::vector<std::string>{
                  CsvField(c.name()), CsvField(c.provider()), CsvField(c.currency()),
                  CsvField(c.retrieved()), CsvField(p.device_id()), CsvField(p.instance_type()),
                  absl::StrCat(GpusPerInstance(p)), CsvField(p.instance_description()),
                  CsvField(p.region()), absl::StrFormat("%.6f", p.on_demand_per_gpu_hour()),
                  absl::StrFormat("%.6f", p.spot_per_gpu_hour())},
              ","),
          "\n");
    }
  }
  return out;
}

}  // namespace habitat
