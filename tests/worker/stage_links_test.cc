// A worker's links to other stages on their own (worker/stage_links.h),
// without opening a socket: an endpoint is checked when an Assign names it,
// a frame for a link the assignment never named is refused as such, and a
// new Assign forgets the old links.
#include "worker/stage_links.h"

#include <gtest/gtest.h>

#include <vector>

namespace lockstep {
namespace {

class StageLinksTest : public ::testing::Test {
 protected:
  StageLinks Links(bool insecure) {
    return StageLinks(context_, wire::TransportOptions{}, "w1", insecure);
  }

  zmq::context_t context_;
  const std::vector<uint8_t> frame_ = {1, 2, 3};
};

TEST_F(StageLinksTest, AnEndpointIsCheckedWhenTheAssignNamesIt) {
  StageLinks links = Links(/*insecure=*/false);
  const Status keyless = links.SetNext("tcp://10.0.0.2:5555", "stage 1");
  EXPECT_EQ(keyless.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(keyless.message(),
            "next stage tcp://10.0.0.2:5555: the assignment names no CURVE key for the next stage");
  EXPECT_EQ(links.SetRing("tcp://10.0.0.1:5555").message(),
            "first stage tcp://10.0.0.1:5555: the assignment names no CURVE key for the first "
            "stage");
  EXPECT_FALSE(links.SetNext("tcp://*:5555", "stage 1").ok()) << "not an endpoint to connect to";
  EXPECT_TRUE(links.SetNext("inproc://stage-1", "stage 1").ok()) << "inproc: no key to pin";
  links.Reset("a-key", "");
  EXPECT_TRUE(links.SetNext("tcp://10.0.0.2:5555", "stage 1").ok()) << "the Assign names its key";
  EXPECT_TRUE(Links(/*insecure=*/true).SetNext("tcp://10.0.0.2:5555", "stage 1").ok())
      << "plaintext links pin no key";
}

TEST_F(StageLinksTest, AFrameForALinkNeverNamedIsRefused) {
  StageLinks links = Links(/*insecure=*/true);
  const Status next = links.SendNext(frame_);
  EXPECT_EQ(next.kind(), ErrorKind::kDisconnected);
  EXPECT_EQ(next.message(), "cannot send to the next stage (): no next stage connected");
  const Status ring = links.SendRing(frame_);
  EXPECT_EQ(ring.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(ring.message(),
            "a relayed step, but the assignment names no first stage to relay to");
  EXPECT_EQ(links.bytes_to_next(), 0u);
  wire::Client* open[2] = {};
  EXPECT_EQ(links.Open(open), 0u) << "nothing connected";
}

TEST_F(StageLinksTest, ANewAssignForgetsTheOldLinks) {
  StageLinks links = Links(/*insecure=*/true);
  ASSERT_TRUE(links.SetRing("tcp://10.0.0.1:5555").ok());
  links.Reset("", "");
  EXPECT_EQ(links.SendRing(frame_).message(),
            "a relayed step, but the assignment names no first stage to relay to")
      << "no ring hop any more";
}

}  // namespace
}  // namespace lockstep
