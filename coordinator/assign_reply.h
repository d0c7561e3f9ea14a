// What a worker must answer an Assign with, checked one message at a time:
// a Hello whose protocol version and artifact digests (weights, config,
// tokenizer, table, inv_freq table) are the coordinator's, then an
// AssignAck naming the very stage it was assigned (index and layers). An
// ErrorReport of no session is the worker refusing the assignment. Any
// other message is no answer to an Assign and passes unchecked.
//
// The one home of these rules: the handshake at Start and a recovery's
// Assigns (RecoveryMachine) both check replies here. Pure functions;
// errors name `who` (the worker, as WorkerInfo::Describe says it).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "engine/stage_tensors.h"
#include "engine/witness.h"
#include "wire/messages.h"

namespace lockstep {

// Hello, AssignAck, or an ErrorReport of no session.
bool IsAssignReply(const wire::Message& m);

// One message from the worker `who` that was assigned stage `index` =
// `spec`. hello_seen: whether its Hello for this Assign came already (set
// by a valid Hello). Ok, with *acked set on a valid AssignAck; else why
// the worker is refused: Mismatch (a digest or the protocol version),
// Invalid (an ack before the Hello, or of another stage), or the kind the
// worker refused with.
Status CheckAssignReply(const std::string& who, size_t index, const StageSpec& spec,
                        const WitnessSeed& seed, const wire::Message& m, bool* hello_seen,
                        bool* acked);

}  // namespace lockstep
