#include "server/listen_address.h"

#include "gtest/gtest.h"

namespace habitat {
namespace {

TEST(MetricsListenAddressTest, BarePortTakesTheHostOfTheGrpcAddress) {
  EXPECT_EQ(MetricsListenAddress(":9464", "127.0.0.1:50051"), "127.0.0.1:9464");
  EXPECT_EQ(MetricsListenAddress(":9464", "0.0.0.0:50051"), "0.0.0.0:9464");
  EXPECT_EQ(MetricsListenAddress(":9464", "[::1]:50051"), "[::1]:9464");
  EXPECT_EQ(MetricsListenAddress(":0", "localhost:0"), "localhost:0");
}

TEST(MetricsListenAddressTest, NoHostToShareMeansLoopback) {
  EXPECT_EQ(MetricsListenAddress(":9464", "unix:/run/habitat.sock"), "127.0.0.1:9464");
  EXPECT_EQ(MetricsListenAddress(":9464", ":50051"), "127.0.0.1:9464");
}

TEST(MetricsListenAddressTest, AnExplicitAddressOrEmptyIsKept) {
  EXPECT_EQ(MetricsListenAddress("0.0.0.0:9464", "127.0.0.1:50051"), "0.0.0.0:9464");
  EXPECT_EQ(MetricsListenAddress("", "127.0.0.1:50051"), "");
}

}  // namespace
}  // namespace habitat
