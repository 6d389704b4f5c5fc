// Formatting rules that golden files cannot pin down by themselves:
// ordering, escaping and CSV quoting. The responses here are built by hand
// only to exercise the printer; real predictions are in tests/golden.
#include "client/cli_output.h"

#include "absl/strings/str_split.h"
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
  EXPECT_THAT(without, HasSubstr("no host timeline in the trace: samples/s, costs and ranks use "
                                 "GPU ms"));
  auto* p = response.mutable_predictions(0);
  p->set_wall_ns(4000000);
  p->set_wall_time_ns(4000000);
  p->set_wall_time_is_gpu_time(false);
  p->set_host_bound(true);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("wall ms"));
  EXPECT_THAT(table, HasSubstr("4.000!"));
  EXPECT_THAT(table, HasSubstr("host-bound"));
  EXPECT_THAT(table, HasSubstr("samples/s, costs and ranks use it"));
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
  EXPECT_THAT(table, HasSubstr("bad?warning"));
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
  EXPECT_THAT(table, HasSubstr("   3.000  12.3%"));
  EXPECT_THAT(table, HasSubstr("   1.000      -"));  // the origin is measured
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
  fallback->set_method(v1::PREDICTION_METHOD_MLP);
  fallback->set_origin_math_mode("tf32");
  fallback->set_target_math_mode("fp32");
  fallback->set_at_hardware_limit(true);
  auto* same = p->add_operations();
  same->set_index(4);
  same->set_name("aten::linear");
  same->set_predicted_forward_ns(3000000);
  same->set_method(v1::PREDICTION_METHOD_MLP);
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
  EXPECT_THAT(table, HasSubstr("60.0%  mlp^     tf32>fp32\n"));
  EXPECT_THAT(table, HasSubstr("30.0%  mlp      bf16\n"));
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
  total->set_method(v1::PREDICTION_METHOD_MLP);
  total->set_predicted_ns(254348847);
  p->add_operations()->set_predicted_forward_ns(1234);
  auto json = FormatJson(response);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"gpu_time_ns\": 329115595,"));  // not "329115595"
  EXPECT_THAT(*json, HasSubstr("\"predicted_ns\": 254348847"));  // in a repeated message
  EXPECT_THAT(*json, HasSubstr("\"predicted_forward_ns\": 1234,"));
  EXPECT_THAT(*json, HasSubstr("\"method\": \"PREDICTION_METHOD_MLP\""));  // enums stay names
  EXPECT_THAT(*json, HasSubstr("\"device_id\": \"A\""));
}

TEST(CliOutputTest, FormatNamesAreChecked) {
  EXPECT_TRUE(ParseOutputFormat("csv").ok());
  EXPECT_THAT(ParseOutputFormat("xml").status().message(), HasSubstr("table, json or csv"));
}

}  // namespace
}  // namespace habitat
