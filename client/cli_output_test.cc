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

v1::DevicePrediction* AddPrediction(v1::PredictResponse* response, const std::string& id,
                                    int rank, int64_t iteration_ns) {
  auto* p = response->add_predictions();
  p->set_device_id(id);
  p->set_rank_by_time(rank);
  p->set_iteration_ns(iteration_ns);
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
  EXPECT_THAT(FormatPredictionTable(response, {}, {}), Not(HasSubstr("wall ms")));
  auto* p = response.mutable_predictions(0);
  p->set_wall_ns(4000000);
  p->set_host_bound(true);
  const std::string table = FormatPredictionTable(response, {}, {});
  EXPECT_THAT(table, HasSubstr("wall ms"));
  EXPECT_THAT(table, HasSubstr("4.000!"));
  EXPECT_THAT(table, HasSubstr("host-bound"));
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

TEST(CliOutputTest, UnscaledPercentIsTheUnscaledShareOfTheIteration) {
  v1::DevicePrediction p;
  p.set_iteration_ns(400);
  auto* scaled = p.add_method_totals();
  scaled->set_method(v1::PREDICTION_METHOD_WAVE_SCALING);
  scaled->set_predicted_ns(300);
  auto* unscaled = p.add_method_totals();
  unscaled->set_method(v1::PREDICTION_METHOD_UNSCALED);
  unscaled->set_predicted_ns(100);
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

TEST(CliOutputTest, FormatNamesAreChecked) {
  EXPECT_TRUE(ParseOutputFormat("csv").ok());
  EXPECT_THAT(ParseOutputFormat("xml").status().message(), HasSubstr("table, json or csv"));
}

}  // namespace
}  // namespace habitat
