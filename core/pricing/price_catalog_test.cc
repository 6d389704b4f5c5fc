#include "core/pricing/price_catalog.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

using habitat::v1::GpuPrice;
using habitat::v1::PriceCatalog;
using ::testing::HasSubstr;

const std::string kDataDir = HABITAT_DATA_DIR;

const DeviceDatabase& Devices() {
  static const DeviceDatabase* db = [] {
    auto loaded = DeviceDatabase::LoadFromFile(kDataDir + "/devices.textproto");
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      std::abort();
    }
    return new DeviceDatabase(*std::move(loaded));
  }();
  return *db;
}

PriceCatalog ParseCatalog(const std::string& text) {
  PriceCatalog catalog;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &catalog)) << text;
  return catalog;
}

// A fresh directory under the test's temp dir.
std::string MakeDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFileOrDie(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

constexpr char kValidFileCatalog[] = R"pb(
  provider: "Example"
  currency: "USD"
  source: "https://example.invalid/pricing"
  retrieved: "2025-01-31"
  prices {
    device_id: "T4"
    instance_type: "x.1"
    gpus_per_instance: 1
    region: "r1"
    on_demand_per_gpu_hour: 0.5
  }
)pb";

TEST(PriceCatalogTest, RealCatalogsLoad) {
  auto set = CatalogSet::LoadFromDirectory(kDataDir + "/catalogs", Devices());
  ASSERT_TRUE(set.ok()) << set.status();
  for (const char* name : {"aws", "azure", "gcp", "lambda"}) {
    auto catalog = set->Get(name);
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    EXPECT_EQ((*catalog)->name(), name);
    EXPECT_EQ((*catalog)->currency(), "USD");
    EXPECT_FALSE((*catalog)->prices().empty()) << name;
  }
  // Sorted by file name.
  ASSERT_EQ(set->catalogs().size(), 4u);
  EXPECT_EQ(set->catalogs().front().name(), "aws");
  EXPECT_EQ(set->catalogs().back().name(), "lambda");
}

TEST(PriceCatalogTest, RealCatalogsArePlausible) {
  auto set = CatalogSet::LoadFromDirectory(kDataDir + "/catalogs", Devices());
  ASSERT_TRUE(set.ok()) << set.status();
  for (const PriceCatalog& catalog : set->catalogs()) {
    for (const auto& price : catalog.prices()) {
      // A GPU-hour between a cent and $100: catches a forgotten division by
      // the instance's GPU count or a price per minute.
      EXPECT_GT(price.on_demand_per_gpu_hour(), 0.01)
          << catalog.name() << " " << price.instance_type();
      EXPECT_LT(price.on_demand_per_gpu_hour(), 100)
          << catalog.name() << " " << price.instance_type();
      // Spot is a discount when published.
      EXPECT_LT(price.spot_per_gpu_hour(), price.on_demand_per_gpu_hour())
          << catalog.name() << " " << price.instance_type();
    }
  }
}

// The real catalogs list several instance sizes for some GPUs; the price is
// the smallest instance's, whose per-GPU price is often higher than an 8-GPU
// box's, and a shape without spot is skipped for spot prices.
TEST(PriceCatalogTest, RealCatalogsPriceTheSmallestInstance) {
  auto set = CatalogSet::LoadFromDirectory(kDataDir + "/catalogs", Devices());
  ASSERT_TRUE(set.ok()) << set.status();
  using habitat::v1::PRICE_KIND_ON_DEMAND;
  using habitat::v1::PRICE_KIND_SPOT;
  auto aws = set->Get("aws");
  ASSERT_TRUE(aws.ok()) << aws.status();
  const GpuPrice* t4 = ChoosePrice(**aws, "T4", PRICE_KIND_ON_DEMAND);
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->instance_type(), "g4dn.xlarge");
  EXPECT_DOUBLE_EQ(PricePerGpuHour(*t4, PRICE_KIND_ON_DEMAND), 0.526);
  // p5.4xlarge publishes no spot price; p5.48xlarge's spot applies.
  const GpuPrice* h100_spot = ChoosePrice(**aws, "H100-SXM", PRICE_KIND_SPOT);
  ASSERT_NE(h100_spot, nullptr);
  EXPECT_EQ(h100_spot->instance_type(), "p5.48xlarge");
  EXPECT_EQ(GpusPerInstance(*h100_spot), 8u);
  EXPECT_DOUBLE_EQ(PricePerGpuHour(*h100_spot, PRICE_KIND_SPOT), 17.6289 / 8);
  EXPECT_EQ(ChoosePrice(**aws, "H100-SXM", PRICE_KIND_ON_DEMAND)->instance_type(), "p5.4xlarge");
  EXPECT_EQ(ChoosePrice(**aws, "RTX4090", PRICE_KIND_ON_DEMAND), nullptr);
  // Lambda's 1x H100 costs 4.29 per GPU-hour, its 8x box 3.99.
  auto lambda = set->Get("lambda");
  ASSERT_TRUE(lambda.ok()) << lambda.status();
  const GpuPrice* h100 = ChoosePrice(**lambda, "H100-SXM", PRICE_KIND_ON_DEMAND);
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(GpusPerInstance(*h100), 1u);
  EXPECT_DOUBLE_EQ(PricePerGpuHour(*h100, PRICE_KIND_ON_DEMAND), 4.29);
  // GCP: a2-highgpu-1g, not the 16-GPU a2-megagpu-16g.
  auto gcp = set->Get("gcp");
  ASSERT_TRUE(gcp.ok()) << gcp.status();
  EXPECT_EQ(ChoosePrice(**gcp, "A100-SXM-40GB", PRICE_KIND_ON_DEMAND)->instance_type(),
            "a2-highgpu-1g");
}

TEST(PriceCatalogTest, GetUnknownListsNames) {
  auto set = CatalogSet::LoadFromDirectory(kDataDir + "/catalogs", Devices());
  ASSERT_TRUE(set.ok()) << set.status();
  auto missing = set->Get("oracle");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"oracle\""));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("aws, azure, gcp, lambda"));
  // Names in any case; a near miss gets the closest.
  auto upper = set->Get("AWS");
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ((*upper)->name(), "aws");
  EXPECT_THAT(std::string(set->Get("lamda").status().message()),
              HasSubstr("(did you mean 'lambda'?)"));
}

TEST(ChoosePriceTest, SmallestInstanceThenLowestPrice) {
  const PriceCatalog catalog = ParseCatalog(R"pb(
    currency: "USD"
    prices {
      device_id: "A100-SXM-40GB"
      instance_type: "one-a"
      gpus_per_instance: 1
      on_demand_per_gpu_hour: 4.1
      spot_per_gpu_hour: 0
    }
    prices {
      device_id: "A100-SXM-40GB"
      instance_type: "eight"
      gpus_per_instance: 8
      on_demand_per_gpu_hour: 3.0
      spot_per_gpu_hour: 1.0
    }
    prices {
      device_id: "A100-SXM-40GB"
      instance_type: "one-b"
      gpus_per_instance: 1
      on_demand_per_gpu_hour: 3.9
      spot_per_gpu_hour: 2.5
    }
    prices {
      device_id: "A100-SXM-40GB"
      instance_type: "two"
      gpus_per_instance: 2
      on_demand_per_gpu_hour: 3.5
      spot_per_gpu_hour: 1.5
    }
    prices { device_id: "T4" on_demand_per_gpu_hour: 0.35 }
  )pb");
  using habitat::v1::PRICE_KIND_ON_DEMAND;
  using habitat::v1::PRICE_KIND_SPOT;
  using habitat::v1::PRICE_KIND_UNSPECIFIED;
  auto chosen = [&](const char* id, habitat::v1::PriceKind kind) {
    const GpuPrice* price = ChoosePrice(catalog, id, kind);
    return price == nullptr ? std::string("none") : price->instance_type();
  };
  // One-GPU instances first, the cheaper of them; the 8-GPU box's lower
  // per-GPU price does not count.
  EXPECT_EQ(chosen("A100-SXM-40GB", PRICE_KIND_ON_DEMAND), "one-b");
  EXPECT_EQ(chosen("A100-SXM-40GB", PRICE_KIND_UNSPECIFIED), "none");  // resolved by the backend
  EXPECT_EQ(chosen("A100-SXM-40GB", PRICE_KIND_SPOT), "one-b");
  // T4 states no GPU count: read as one GPU.
  EXPECT_EQ(chosen("T4", PRICE_KIND_ON_DEMAND), "");
  EXPECT_EQ(GpusPerInstance(*ChoosePrice(catalog, "T4", PRICE_KIND_ON_DEMAND)), 1u);
  EXPECT_EQ(chosen("T4", PRICE_KIND_SPOT), "none");  // no spot price is not free
  EXPECT_EQ(chosen("H100-SXM", PRICE_KIND_ON_DEMAND), "none");
  EXPECT_EQ(chosen("A100-SXM-40GB", static_cast<habitat::v1::PriceKind>(7)), "none");
  // Without the one-GPU spot price, spot goes to the smallest that has one.
  PriceCatalog no_small_spot = catalog;
  no_small_spot.mutable_prices(2)->set_spot_per_gpu_hour(0);
  EXPECT_EQ(ChoosePrice(no_small_spot, "A100-SXM-40GB", PRICE_KIND_SPOT)->instance_type(), "two");
}

TEST(ValidateCatalogTest, AcceptsMinimalInlineCatalog) {
  const PriceCatalog catalog = ParseCatalog(R"pb(
    currency: "EUR"
    prices { device_id: "L4" on_demand_per_gpu_hour: 0.8 }
  )pb");
  EXPECT_TRUE(ValidateCatalog(catalog, Devices()).ok());
}

struct InlineCase {
  std::string name;
  std::string text;
  std::string message;  // expected substring
};

void PrintTo(const InlineCase& c, std::ostream* os) { *os << c.name; }

class InlineCatalogTest : public ::testing::TestWithParam<InlineCase> {};

TEST_P(InlineCatalogTest, RejectsNamingFieldAndIndex) {
  const InlineCase& c = GetParam();
  const absl::Status status = ValidateCatalog(ParseCatalog(c.text), Devices());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, InlineCatalogTest,
    ::testing::Values(
        InlineCase{"NoCurrency", R"pb(prices { device_id: "T4" on_demand_per_gpu_hour: 1 })pb",
                   "inline_catalog.currency must not be empty"},
        InlineCase{"NoPrices", R"pb(currency: "USD")pb",
                   "inline_catalog.prices must list at least one GPU"},
        InlineCase{"UnknownDevice",
                   R"pb(currency: "USD"
                        prices { device_id: "T4" on_demand_per_gpu_hour: 1 }
                        prices { device_id: "K80" on_demand_per_gpu_hour: 1 })pb",
                   "inline_catalog.prices[1].device_id \"K80\" is not a known "
                   "GPU id"},
        InlineCase{"ZeroOnDemand",
                   R"pb(currency: "USD"
                        prices { device_id: "T4" on_demand_per_gpu_hour: 1 }
                        prices { device_id: "T4" on_demand_per_gpu_hour: 1 }
                        prices { device_id: "T4" on_demand_per_gpu_hour: 1 }
                        prices { device_id: "L4" on_demand_per_gpu_hour: 0 })pb",
                   "inline_catalog.prices[3].on_demand_per_gpu_hour must be "
                   "finite and > 0"},
        InlineCase{"NegativeOnDemand",
                   R"pb(currency: "USD"
                        prices { device_id: "T4" on_demand_per_gpu_hour: -2 })pb",
                   "prices[0].on_demand_per_gpu_hour must be finite and > 0 "
                   "(got -2)"},
        InlineCase{"InfiniteOnDemand",
                   R"pb(currency: "USD"
                        prices { device_id: "T4" on_demand_per_gpu_hour: inf })pb",
                   "prices[0].on_demand_per_gpu_hour"},
        InlineCase{"NaNOnDemand",
                   R"pb(currency: "USD"
                        prices { device_id: "T4" on_demand_per_gpu_hour: nan })pb",
                   "prices[0].on_demand_per_gpu_hour"},
        InlineCase{
            "NegativeSpot",
            R"pb(currency: "USD"
                 prices { device_id: "T4" on_demand_per_gpu_hour: 1 spot_per_gpu_hour: -0.1 })pb",
            "inline_catalog.prices[0].spot_per_gpu_hour must be finite "
            "and >= 0"},
        InlineCase{
            "NaNSpot",
            R"pb(currency: "USD"
                 prices { device_id: "T4" on_demand_per_gpu_hour: 1 spot_per_gpu_hour: nan })pb",
            "prices[0].spot_per_gpu_hour"}),
    [](const ::testing::TestParamInfo<InlineCase>& info) { return info.param.name; });

TEST(CatalogSetTest, NameDefaultsToStemAndIgnoresOtherFiles) {
  const std::string dir = MakeDir("stem");
  WriteFileOrDie(dir + "/example.textproto", kValidFileCatalog);
  WriteFileOrDie(dir + "/README.md", "not a catalog");
  WriteFileOrDie(dir + "/named.textproto", absl::StrCat("name: \"other\"\n", kValidFileCatalog));
  auto set = CatalogSet::LoadFromDirectory(dir, Devices());
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->catalogs().size(), 2u);
  EXPECT_EQ(set->catalogs()[0].name(), "example");
  EXPECT_EQ(set->catalogs()[1].name(), "other");
  EXPECT_TRUE(set->Get("other").ok());
}

struct FileCase {
  std::string name;
  std::string text;     // contents of broken.textproto
  std::string message;  // expected substring
};

void PrintTo(const FileCase& c, std::ostream* os) { *os << c.name; }

class CatalogFileTest : public ::testing::TestWithParam<FileCase> {};

TEST_P(CatalogFileTest, RejectsNamingFileAndField) {
  const FileCase& c = GetParam();
  const std::string dir = MakeDir("broken_" + c.name);
  WriteFileOrDie(dir + "/broken.textproto", c.text);
  auto set = CatalogSet::LoadFromDirectory(dir, Devices());
  ASSERT_FALSE(set.ok()) << c.name;
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("broken.textproto"));
  EXPECT_THAT(std::string(set.status().message()), HasSubstr(c.message));
}

std::string Without(const std::string& field_line) {
  std::string text = kValidFileCatalog;
  const size_t at = text.find(field_line);
  EXPECT_NE(at, std::string::npos) << field_line;
  text.erase(at, field_line.size());
  return text;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, CatalogFileTest,
    ::testing::Values(
        FileCase{"ParseError", "currency: \"USD\"\nprices { device_id: T4 }\n",
                 "line 2, column 21"},
        FileCase{"UnknownField", "currncy: \"USD\"\n", "line 1"},
        FileCase{"NoSource", Without("source: \"https://example.invalid/pricing\""),
                 "broken.textproto: source must not be empty"},
        FileCase{"NoRetrieved", Without("retrieved: \"2025-01-31\""),
                 "retrieved must be a date YYYY-MM-DD"},
        FileCase{"BadRetrieved",
                 absl::StrCat(Without("retrieved: \"2025-01-31\""), "retrieved: \"2025-13-01\""),
                 "retrieved must be a date YYYY-MM-DD (got \"2025-13-01\")"},
        FileCase{"NoProvider", Without("provider: \"Example\""), "provider must not be empty"},
        FileCase{"NoInstanceType", Without("instance_type: \"x.1\""),
                 "prices[0].instance_type must not be empty"},
        FileCase{"NoRegion", Without("region: \"r1\""), "prices[0].region must not be empty"},
        FileCase{"NoGpusPerInstance", Without("gpus_per_instance: 1"),
                 "prices[0].gpus_per_instance must be at least 1"},
        FileCase{"UnknownDevice",
                 absl::StrCat(kValidFileCatalog,
                              "prices { device_id: \"GTX1080\" instance_type: "
                              "\"y\" region: \"r\" on_demand_per_gpu_hour: 1 }"),
                 "broken.textproto: prices[1].device_id \"GTX1080\""},
        FileCase{"ZeroOnDemand",
                 absl::StrCat(kValidFileCatalog,
                              "prices { device_id: \"T4\" instance_type: \"y\" "
                              "region: \"r\" }"),
                 "broken.textproto: prices[1].on_demand_per_gpu_hour"}),
    [](const ::testing::TestParamInfo<FileCase>& info) { return info.param.name; });

TEST(CatalogSetTest, DuplicateNamesRejected) {
  const std::string dir = MakeDir("dup");
  WriteFileOrDie(dir + "/a.textproto", absl::StrCat("name: \"x\"\n", kValidFileCatalog));
  WriteFileOrDie(dir + "/b.textproto", absl::StrCat("name: \"x\"\n", kValidFileCatalog));
  auto set = CatalogSet::LoadFromDirectory(dir, Devices());
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(std::string(set.status().message()),
              HasSubstr("b.textproto: catalog name \"x\" is used by another file"));
}

TEST(CatalogSetTest, MissingOrEmptyDirectory) {
  EXPECT_EQ(
      CatalogSet::LoadFromDirectory(::testing::TempDir() + "/nope", Devices()).status().code(),
      absl::StatusCode::kNotFound);
  const std::string dir = MakeDir("empty");
  auto set = CatalogSet::LoadFromDirectory(dir, Devices());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(set.status().message()), HasSubstr("no *.textproto"));
}

}  // namespace
}  // namespace habitat
