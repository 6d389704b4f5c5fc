// Formatting rules that golden files cannot pin down by themselves:
// ordering, escaping and CSV quoting. The responses here are built by hand
// only to exercise the printer; real predictions are in tests/golden.
#include "client/cli_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_text.h"
#include "client/cli_warnings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::DevicePrediction* AddPrediction(v1::PredictResponse* response, const std::string& id, int rank,
                                    int64_t gpu_time_ns) {
  auto* p = response->add_predictions();
  p->set_device_id(id);
  p->set_rank_by_time(rank);
  p->set_gpu_time_ns(gpu_time_ns);
  // As the engine fills a prediction without a replayed host timeline.
  p->set_wall_time_ns(gpu_time_ns);
  p->set_wall_time_is_gpu_time(true);
  return p;
}

TEST(CliOutputTest, TableIsSortedByRankAndFitsIn100Columns) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  AddPrediction(&response, "SLOW", 2, 2000000);
  AddPrediction(&response, "FAST", 1, 1000000)->set_is_origin(true);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_LT(table.find("FAST*"), table.find("SLOW"));
  EXPECT_THAT(table, HasSubstr("prices: none"));
  for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u);
}

TEST(CliOutputTest, WallColumnOnlyWhenTheServiceReplayedTheHost) {
  v1::PredictResponse response;
  AddPrediction(&response, "A", 1, 1000000);
  const std::string without = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(without, Not(HasSubstr("wall ms")));
  EXPECT_THAT(without, HasSubstr("no host timeline in the trace: smp/s (samples per second), "
                                 "costs and ranks use GPU ms"));
  auto* p = response.mutable_predictions(0);
  p->set_wall_time_ns(4000000);
  p->set_wall_time_is_gpu_time(false);
  p->set_host_bound(true);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("wall ms"));
  EXPECT_THAT(table, HasSubstr("4.000!"));
  EXPECT_THAT(table, HasSubstr("host-bound"));
  EXPECT_THAT(table, HasSubstr("smp/s (samples per second), costs and ranks use it"));
}

// An origin whose wall time comes from a torch.profiler step (the engine
// warns so on it, with one of two kinds) says "profiled" on its row and in
// the legend; an origin without that warning does not.
TEST(CliOutputTest, ProfiledOriginSaysSoOnItsRow) {
  for (const char* kind : {"profiler_cost_estimated", "profiled_host_timeline", ""}) {
    v1::PredictResponse response;
    response.set_batch_size(8);
    AddPrediction(&response, "H100-SXM", 1, 1000000)->set_is_origin(true);
    AddPrediction(&response, "H200", 2, 2000000);
    auto* origin = response.mutable_predictions(0);
    origin->set_wall_time_ns(4000000);
    origin->set_wall_time_is_gpu_time(false);
    if (*kind != '\0') {
      origin->add_warnings("profiled: this wall time is ...");
      origin->add_warning_kinds(kind);
    }
    const std::string table = FormatPredictionTable(response, {}, {});
    const bool profiled = *kind != '\0';
    EXPECT_EQ(table.find("H100-SXM* profiled") != std::string::npos, profiled) << kind;
    EXPECT_EQ(table.find("profiled: its wall time comes from the torch.profiler step") !=
                  std::string::npos,
              profiled)
        << kind;
    EXPECT_THAT(table, Not(HasSubstr("H200 profiled")));
    for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u);
  }
}

// From a trace of one FSDP rank the origin's row is a prediction too (the
// rank's work as one GPU's step), and its note says so.
TEST(CliOutputTest, AnFsdpRanksOriginIsNotCalledMeasured) {
  for (const bool rank : {true, false}) {
    v1::PredictResponse response;
    response.set_batch_size(8);
    AddPrediction(&response, "H200", 0, 1000000)->set_is_origin(true);
    if (rank) response.add_structured_warnings()->set_kind("fsdp_rank");
    const std::string table = FormatPredictionTable(response, {}, {});
    EXPECT_EQ(table.find("the measured time, not a prediction") == std::string::npos, rank);
    EXPECT_EQ(table.find("the FSDP rank's work as one GPU's step") != std::string::npos, rank);
  }
}

// A prediction by trace id has no trace to read the model and precision
// from; the response carries them.
TEST(CliOutputTest, HeaderNamesTheModelAndPrecisionItIsGiven) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  AddPrediction(&response, "H100-SXM", 1, 1000000);
  EXPECT_THAT(FormatPredictionTable(response, {}, {}), HasSubstr("model ?  batch 8  precision ?"));
  PredictionHeader header;
  header.model_name = "gpt2";
  header.precision = "bf16";
  EXPECT_THAT(FormatPredictionTable(response, header, {}),
              HasSubstr("model gpt2  batch 8  precision bf16"));
}

TEST(CliOutputTest, PricedRowsNameTheirInstance) {
  v1::PredictResponse response;
  response.set_catalog("aws");
  response.set_currency("USD");
  auto* big = AddPrediction(&response, "B200", 1, 1000000);
  big->set_has_price(true);
  big->set_price_per_hour(14.2416);
  big->set_instance_type("p6-b200.48xlarge");
  big->set_gpus_per_instance(8);
  big->set_instance_description("8x B200; 113.9328 $/h");
  auto* small = AddPrediction(&response, "T4", 2, 9000000);
  small->set_has_price(true);
  small->set_price_per_hour(0.526);
  small->set_instance_type("g4dn.xlarge");
  small->set_gpus_per_instance(1);
  AddPrediction(&response, "P4", 3, 9500000);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("  instance\n"));
  EXPECT_THAT(table, HasSubstr("  p6-b200.48xlarge/8\n"));
  EXPECT_THAT(table, HasSubstr("  g4dn.xlarge\n"));
  EXPECT_THAT(table, HasSubstr("  instance: the instance type priced, the smallest"));
  const std::string csv = FormatPredictionCsv(response);
  EXPECT_THAT(csv, HasSubstr(",p6-b200.48xlarge,8,8x B200; 113.9328 $/h,"));
  EXPECT_THAT(csv, HasSubstr(",g4dn.xlarge,1,,"));
}

TEST(CliOutputTest, ControlCharactersAreNotPrinted) {
  v1::PredictResponse response;
  auto* p = AddPrediction(&response, "GPU\x1b[31m", 1, 10);
  p->add_warnings("bad\rwarning");
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, Not(HasSubstr("\x1b")));
  EXPECT_THAT(table, Not(HasSubstr("\r")));
  const std::string warnings = FormatPredictionWarnings(response, true);
  EXPECT_THAT(warnings, Not(HasSubstr("\x1b")));
  EXPECT_THAT(warnings, HasSubstr("GPU?[31m: bad?warning"));
  auto* kinded = response.add_structured_warnings();
  kinded->set_kind("odd\nkind");
  kinded->set_summary("two\nlines");
  kinded->add_details()->set_text("a\rdetail");
  EXPECT_THAT(FormatPredictionWarnings(response, true),
              HasSubstr("  two?lines [odd?kind]\n    - a?detail\n"));
  EXPECT_EQ(Printable("a\tb\x7f"), "a?b?");
}

TEST(CliOutputTest, CsvQuotesFieldsAndKeepsItsHeader) {
  v1::PredictResponse response;
  auto* p = AddPrediction(&response, "A", 1, 1500000);
  p->set_display_name("Name, with \"quotes\"");
  const std::string csv = FormatPredictionCsv(response);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], PredictionCsvHeader());
  EXPECT_THAT(lines[1], HasSubstr("\"Name, with \"\"quotes\"\"\""));
  EXPECT_THAT(lines[1], HasSubstr(",1.500000,"));
}

TEST(CliOutputTest, ExpectedErrorPerGpuInTheTableAndTheCsv) {
  v1::PredictResponse response;
  AddPrediction(&response, "ORIGIN", 1, 1000000)->set_is_origin(true);
  AddPrediction(&response, "OTHER", 2, 3000000)->set_expected_error_percent(12.345);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("±err"));
  EXPECT_THAT(table, HasSubstr("  3.000  12%"));  // whole percents
  EXPECT_THAT(table, HasSubstr("  1.000    -"));  // the origin is measured
  const std::vector<std::string> lines = absl::StrSplit(FormatPredictionCsv(response), '\n');
  ASSERT_GE(lines.size(), 3u);
  EXPECT_THAT(lines[0], HasSubstr(",host_bound,expected_error_percent,instance_type,"));
  EXPECT_THAT(lines[1], HasSubstr(",0.000,"));
  EXPECT_THAT(lines[2], HasSubstr(",12.345,"));
}

TEST(CliOutputTest, BreakdownShowsMathModesAndTheHardwareLimit) {
  v1::PredictResponse response;
  auto* p = AddPrediction(&response, "V100", 1, 10000000);
  auto* fallback = p->add_operations();
  fallback->set_index(3);
  fallback->set_name("aten::conv2d");
  fallback->set_predicted_forward_ns(6000000);
  fallback->set_method(v1::PREDICTION_METHOD_KERNEL_VARYING);
  fallback->set_origin_math_mode("tf32");
  fallback->set_target_math_mode("fp32");
  fallback->set_at_hardware_limit(true);
  auto* same = p->add_operations();
  same->set_index(4);
  same->set_name("aten::linear");
  same->set_predicted_forward_ns(3000000);
  same->set_method(v1::PREDICTION_METHOD_KERNEL_VARYING);
  same->set_origin_math_mode("bf16");
  same->set_target_math_mode("bf16");
  auto* alike = p->add_operations();
  alike->set_index(5);
  alike->set_name("aten::relu");
  alike->set_predicted_forward_ns(1000000);
  alike->set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  TableOptions options;
  options.breakdown = true;
  const std::string table = FormatPredictionTable(response, {}, options);
  EXPECT_THAT(table, HasSubstr("60.0%  trees^   tf32>fp32\n"));
  EXPECT_THAT(table, HasSubstr("30.0%  trees    bf16\n"));
  EXPECT_THAT(table, HasSubstr("10.0%  wave\n"));  // no mode, no trailing blanks
  EXPECT_THAT(table, HasSubstr("  ^ at_hardware_limit: predicted faster than"));
  EXPECT_THAT(table, HasSubstr("  mode: math mode on the origin GPU"));
  for (absl::string_view line : absl::StrSplit(table, '\n')) EXPECT_LE(line.size(), 100u);
  // Neither legend when the printed rows have no modes or limits.
  options.top_operations = 0;
  EXPECT_THAT(FormatPredictionTable(response, {}, options), Not(HasSubstr("^ at_hardware_limit")));
}

// The share of the origin GPU time, the denominator the response's warning
// about the same operations uses: here 100 of 400 ns on the origin, although
// the scaled operations got 3x faster on the target (100 of 200 predicted).
TEST(CliOutputTest, UnscaledPercentIsTheUnscaledShareOfTheOriginTime) {
  v1::DevicePrediction p;
  p.set_gpu_time_ns(200);
  auto* scaled = p.add_method_totals();
  scaled->set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  scaled->set_predicted_ns(100);
  scaled->set_origin_ns(300);
  auto* unscaled = p.add_method_totals();
  unscaled->set_method(v1::PREDICTION_METHOD_UNSCALED);
  unscaled->set_predicted_ns(100);
  unscaled->set_origin_ns(100);
  EXPECT_DOUBLE_EQ(UnscaledPercent(p), 25.0);
  EXPECT_DOUBLE_EQ(UnscaledPercent(v1::DevicePrediction()), 0.0);
}

TEST(CliOutputTest, JsonUsesProtoFieldNamesAndPrintsZeroes) {
  v1::PredictResponse response;
  AddPrediction(&response, "A", 1, 0);
  auto json = FormatJson(response);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"device_id\": \"A\""));
  EXPECT_THAT(*json, HasSubstr("\"has_price\": false"));
}

TEST(CliOutputTest, JsonPrints64BitIntegersAsNumbers) {
  v1::PredictResponse response;
  auto* p = AddPrediction(&response, "A", 1, 329115595);
  auto* total = p->add_method_totals();
  total->set_method(v1::PREDICTION_METHOD_KERNEL_VARYING);
  total->set_predicted_ns(254348847);
  p->add_operations()->set_predicted_forward_ns(1234);
  auto json = FormatJson(response);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"gpu_time_ns\": 329115595,"));  // not "329115595"
  EXPECT_THAT(*json, HasSubstr("\"predicted_ns\": 254348847"));  // in a repeated message
  EXPECT_THAT(*json, HasSubstr("\"predicted_forward_ns\": 1234,"));
  EXPECT_THAT(*json,
              HasSubstr("\"method\": \"PREDICTION_METHOD_MLP\""));  // enums stay names
  EXPECT_THAT(*json, HasSubstr("\"device_id\": \"A\""));
}

TEST(CliOutputTest, FormatNamesAreChecked) {
  EXPECT_TRUE(ParseOutputFormat("csv").ok());
  EXPECT_THAT(ParseOutputFormat("xml").status().message(), HasSubstr("table, json or csv"));
}

// Times to four significant digits, so the columns stay narrow.
TEST(CliOutputTest, MillisecondsToFourSignificantDigits) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  AddPrediction(&response, "A", 1, 8'977'600);
  AddPrediction(&response, "B", 2, 42'798'400);
  AddPrediction(&response, "C", 3, 123'208'000);
  AddPrediction(&response, "D", 4, 1'234'567'000);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("A    8.978"));
  EXPECT_THAT(table, HasSubstr("B    42.80"));
  EXPECT_THAT(table, HasSubstr("C    123.2"));
  EXPECT_THAT(table, HasSubstr("D     1235"));
}

// A long instance name gives way so that the row fits in 100 columns; the
// "/N" stays.
TEST(CliOutputTest, LongInstanceNamesAreShortenedToFit) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  response.set_catalog("azure");
  response.set_currency("USD");
  auto* p = AddPrediction(&response, "A100-PCIE-80GB", 1, 123'456'789);
  p->set_batch_size(1024);
  p->mutable_memory()->set_peak_allocated_bytes(int64_t{100} << 30);
  p->set_has_price(true);
  p->set_price_per_hour(12.345);
  p->set_cost_per_1000_samples(0.000012345);
  p->set_instance_type("Standard_ND96asr_A100_v4_with_a_longer_name");
  p->set_gpus_per_instance(8);
  p->set_wall_time_ns(223'456'789);
  p->set_wall_time_is_gpu_time(false);
  p->set_host_bound(true);
  p->add_method_totals()->set_method(v1::PREDICTION_METHOD_UNSCALED);
  p->mutable_method_totals(0)->set_origin_ns(5);
  const std::string table = FormatPredictionTable(response, {}, {});
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    EXPECT_LE(DisplayWidth(line), kTableWidth) << line;
  }
  EXPECT_THAT(table, HasSubstr("  Standard.../8\n"));
}

v1::Warning* AddWarning(v1::PredictResponse* response, const std::string& kind,
                        const std::string& summary, std::vector<std::string> ids) {
  auto* w = response->add_structured_warnings();
  w->set_kind(kind);
  w->set_summary(summary);
  for (const auto& id : ids) w->add_device_ids(id);
  auto* d = w->add_details();
  d->set_text(summary + " in full");
  for (const auto& id : ids) d->add_device_ids(id);
  return w;
}

// One line per kind, naming its GPUs in the table's order: all of them, all
// but a few, a short list, or the first five and how many more.
TEST(CliWarningsTest, OneLinePerKindNamingItsGpus) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  std::vector<std::string> all;
  for (int i = 1; i <= 9; ++i) {
    const std::string id = absl::StrCat("G", i);
    AddPrediction(&response, id, i, i * 1000)->set_is_origin(i == 1);
    all.push_back(id);
  }
  AddWarning(&response, "every", "on every GPU", all);
  AddWarning(&response, "not_origin", "all but the origin",
             std::vector<std::string>(all.begin() + 1, all.end()));
  AddWarning(&response, "most", "all but two", {"G9", "G1", "G2", "G3", "G4", "G5", "G6"});
  AddWarning(&response, "some", "six of them", {"G8", "G2", "G3", "G4", "G5", "G6"});
  AddWarning(&response, "one", "just one", {"G7"});
  AddWarning(&response, "request", "about the trace", {});
  EXPECT_EQ(FormatPredictionWarnings(response, false, "hint"),
            "warnings (hint):\n"
            "  all 9 GPUs: on every GPU\n"
            "  8 GPUs (all but the origin): all but the origin\n"
            "  7 GPUs (all but G7, G8): all but two\n"
            "  6 GPUs (G2, G3, G4, G5, G6, G8): six of them\n"
            "  G7: just one\n"
            "  about the trace\n");
  // Twelve GPUs, a kind on seven of them: the first five named.
  v1::PredictResponse more;
  more.set_batch_size(8);
  std::vector<std::string> ids;
  for (int i = 1; i <= 12; ++i) {
    AddPrediction(&more, absl::StrCat("G", i), i, i * 1000);
    if (i <= 7) ids.push_back(absl::StrCat("G", i));
  }
  AddWarning(&more, "seven", "seven of twelve", ids);
  EXPECT_EQ(FormatPredictionWarnings(more, false),
            "warnings:\n  7 GPUs (G1, G2, G3, G4, G5 and 2 more): seven of twelve\n");
  EXPECT_THAT(FormatPredictionWarnings(more, true),
              HasSubstr("    - 7 GPUs (G1, G2, G3, G4, G5, G6, G7): seven of twelve in full\n"));
  EXPECT_EQ(FormatPredictionWarnings(v1::PredictResponse(), false), "");
}

TEST(CliWarningsTest, ExplainListsEachTextWithItsGpus) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  AddPrediction(&response, "A", 1, 1000);
  AddPrediction(&response, "B", 2, 2000);
  AddPrediction(&response, "C", 3, 3000);
  v1::Warning* w = AddWarning(&response, "hardware_limit", "raised to a limit", {"A", "B"});
  w->mutable_details(0)->set_text("3 operation(s) were raised");
  w->mutable_details(0)->clear_device_ids();
  w->mutable_details(0)->add_device_ids("B");
  auto* second = w->add_details();
  second->set_text("5 operation(s) were raised");
  second->add_device_ids("A");
  EXPECT_EQ(FormatPredictionWarnings(response, true),
            "warnings:\n"
            "  2 GPUs (A, B): raised to a limit [hardware_limit]\n"
            "    - B: 3 operation(s) were raised\n"
            "    - A: 5 operation(s) were raised\n");
}

// A server from before structured_warnings: its strings, one line per
// distinct text with the GPUs it was given for, then the response's own.
TEST(CliWarningsTest, ResponsesWithoutKindsAreGroupedByText) {
  v1::PredictResponse response;
  response.set_batch_size(8);
  AddPrediction(&response, "B", 2, 2000)->add_warnings("old GPU");
  AddPrediction(&response, "A", 1, 1000)->add_warnings("old GPU");
  AddPrediction(&response, "C", 3, 3000)->add_warnings("slow");
  response.add_warnings("the trace has no host timeline");
  const std::string expected =
      "warnings:\n"
      "  2 GPUs (A, B): old GPU\n"
      "  C: slow\n"
      "  the trace has no host timeline\n";
  EXPECT_EQ(FormatPredictionWarnings(response, false), expected);
  EXPECT_EQ(FormatPredictionWarnings(response, true), expected);
}

}  // namespace
}  // namespace habitat
