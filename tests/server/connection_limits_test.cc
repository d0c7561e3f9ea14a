// ConnectionLimits: one client cannot take more than its share, the total
// holds across clients, and closing gives the slot back to its own client.
#include "server/connection_limits.h"

#include <gtest/gtest.h>

#include <thread>

namespace lockstep::server {
namespace {

using Admit = ConnectionLimits::Admit;

TEST(ConnectionLimits, OneClientCannotUseUpTheServer) {
  ConnectionLimits limits(10, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limits.TryOpen("127.0.0.1"), Admit::kYes);
  for (int i = 0; i < 252; ++i) EXPECT_EQ(limits.TryOpen("127.0.0.1"), Admit::kClientFull);
  EXPECT_EQ(limits.open_from("127.0.0.1"), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limits.TryOpen("127.0.0.2"), Admit::kYes);
  EXPECT_EQ(limits.TryOpen("::1"), Admit::kYes);
  EXPECT_EQ(limits.TryOpen("::1"), Admit::kYes);
  EXPECT_EQ(limits.TryOpen("10.0.0.9"), Admit::kServerFull);  // 10 open
  limits.Close("127.0.0.1");
  EXPECT_EQ(limits.open(), 9u);
  EXPECT_EQ(limits.TryOpen("127.0.0.2"), Admit::kClientFull);  // its own share is still full
  EXPECT_EQ(limits.TryOpen("10.0.0.9"), Admit::kYes);
  EXPECT_EQ(limits.TryOpen("127.0.0.1"), Admit::kServerFull);
}

TEST(ConnectionLimits, ClosingEveryConnectionForgetsTheClientAndWakesTheWaiter) {
  ConnectionLimits limits(3, 3);
  ASSERT_EQ(limits.TryOpen("a"), Admit::kYes);
  ASSERT_EQ(limits.TryOpen("a"), Admit::kYes);
  limits.Close("b");  // never admitted: nothing changes
  EXPECT_EQ(limits.open(), 2u);
  std::thread closer([&] {
    limits.Close("a");
    limits.Close("a");
  });
  limits.WaitUntilNoneOpen();
  closer.join();
  EXPECT_EQ(limits.open(), 0u);
  EXPECT_EQ(limits.open_from("a"), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limits.TryOpen("a"), Admit::kYes);
}

}  // namespace
}  // namespace lockstep::server
