# The Lockstep wire protocol.
#
# Every ZeroMQ message between the coordinator and a worker, or from one
# pipeline stage to the next, is exactly one `Envelope`, serialised in
# Cap'n Proto canonical form as a single segment (see docs/wire_protocol.md
# for the byte layout and the decoder's limits).
#
# Sockets: every worker binds a ROUTER; the coordinator connects one DEALER
# to each worker, and stage k connects a DEALER to stage k+1 (`nextHop`).
# A worker replies to the coordinator through its ROUTER, addressed by the
# identity of the DEALER that sent it the Assign.
#
# Evolution rules: field numbers are append-only. A retired field is renamed
# `obsoleteX` and keeps its number; numbers are never reused. A change that
# an old peer would misread bumps `protocolVersion`; peers reject envelopes
# whose `version` differs from their own.
#
# Conventions: integers are host-independent (Cap'n Proto is little-endian
# on the wire). Float tensors travel as `Data` blobs of little-endian
# IEEE-754 binary32 words, never as List(Float32), so that no decoder ever
# loads them through floating-point registers. Digests are raw 32-byte
# SHA-256 values. Layer ranges are half-open: [layerLo, layerHi).

@0xcb327b750bc4316b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("lockstep::wire::schema");

const protocolVersion :UInt32 = 2;
# The version this schema describes; written into every Envelope.

struct Envelope {
  version @0 :UInt32;
  # Must equal `protocolVersion` of the receiver or the envelope is refused.

  union {
    hello @1 :Hello;
    assign @2 :Assign;
    assignAck @3 :AssignAck;
    sessionOpen @4 :SessionOpen;
    prefill @5 :TokenInput;
    decode @6 :TokenInput;
    hidden @7 :HiddenFrame;
    logits @8 :Logits;
    evict @9 :Evict;
    fork @10 :Fork;
    release @11 :Release;
    heartbeat @12 :Heartbeat;
    error @13 :Error;
    shutdown @14 :Shutdown;
    stepResult @15 :StepResult;
  }
}

struct Hello {
  # worker -> coordinator, the first reply to an Assign (sent before the
  # worker checks the assigned hashes). Lets the coordinator check that the
  # worker serves the same bits it expects.
  workerId @0 :Text;            # The worker's name (`--name`), for messages.
  protocolVersion @1 :UInt32;   # The worker's `protocolVersion`.
  weightsSha256 @2 :Data;       # 32 bytes: SHA-256 of the weights file.
  configSha256 @3 :Data;        # 32 bytes: SHA-256 of config.json.
  tokenizerSha256 @4 :Data;     # 32 bytes: SHA-256 of tokenizer.json.
  tableDigest @5 :Data;         # 32 bytes: digest of the worker's math tables.
  invFreqTableDigest @6 :Data;  # 32 bytes: digest of the RoPE inv_freq table.
  isa @7 :Text;                 # Kernel instruction set in use, e.g. "avx2".
}

struct Assign {
  # coordinator -> worker: which slice of the model to serve.
  modelDir @0 :Text;               # Path of the model directory on the worker.
  expectedWeightsSha256 @1 :Data;  # 32 bytes each; the worker refuses to
  expectedConfigSha256 @2 :Data;   # serve if its files hash differently.
  expectedTokenizerSha256 @3 :Data;
  layerLo @4 :UInt32;              # First layer served (inclusive).
  layerHi @5 :UInt32;              # One past the last layer served.
  isFirst @6 :Bool;                # Stage embeds tokens.
  isLast @7 :Bool;                 # Stage applies final norm + LM head.
  nextHop @8 :Text;                # Endpoint of the next stage; empty if last.
  workerIndex @9 :UInt32;          # Position of this stage in the pipeline.
  nextHopKey @10 :Text;            # CURVE public key (Z85) the next stage must
                                   # hold; empty if last or on plaintext links.
  upstreamKey @11 :Text;           # CURVE public key (Z85) of the previous
                                   # stage, which this worker then accepts;
                                   # empty if first or on plaintext links.
  weightFiles @12 :List(WeightFile);
                                   # Sharded checkpoints: the index and every
                                   # file holding a tensor this stage reads,
                                   # with their SHA-256. A GGUF file: its
                                   # parts this stage reads, named
                                   # "FILE:header", "FILE:<tensor>"
                                   # (docs/gguf.md). The worker reads and
                                   # hashes only those, refuses any that
                                   # differs, and then reports
                                   # expectedWeightsSha256 in its Hello.
                                   # Empty: it hashes every weight file.
  ringHop @13 :Text;               # The last stage of two or more: the first
                                   # stage's endpoint, to which it sends the
                                   # next step of a relayed session
                                   # (ChainHandoff.relay). Empty otherwise.
  ringHopKey @14 :Text;            # CURVE public key (Z85) the first stage
                                   # must hold; empty on plaintext links.
  ringUpstreamKey @15 :Text;       # The first stage of two or more: the last
                                   # stage's CURVE key, accepted for relayed
                                   # steps only. Empty otherwise.
}

struct WeightFile {
  name @0 :Text;                   # File name in the model folder (or a
                                   # GGUF file's part: FILE:PART).
  sha256 @1 :Data;                 # 32 bytes.
}

struct AssignAck {
  # worker -> coordinator: the assignment is loaded and verified; the worker
  # is ready for sessions (this is the "Ready" message).
  workerIndex @0 :UInt32;
  layerLo @1 :UInt32;
  layerHi @2 :UInt32;
  residentBytes @3 :UInt64;   # Worker's resident memory (VmRSS) after
                              # loading its layers; 0 when unknown.
}

struct WindowSpec {
  # Attention window of a session.
  union {
    full @0 :Void;               # No window: attend to every position.
    global @1 :UInt32;           # Same window W for every layer.
    perLayer @2 :List(UInt32);   # One W per model layer (0 = full).
  }
}

struct SessionOpen {
  # coordinator -> every worker: allocate state for a new session.
  sessionId @0 :UInt64;
  window @1 :WindowSpec;
  sampling @2 :Sampling;      # How the last stage chooses tokens; null: greedy.
  trace @3 :Bool;             # Every stage reports, per step, the SHA-256 of
                              # the hidden state after each of its layers
                              # (`layerDigests`; docs/receipts.md, trace).
  reservePositions @4 :UInt32;  # Cache entries the session is expected to
                              # reach (prompt + tokens to generate); each
                              # stage reserves them up front, within its
                              # limits, so decode steps do not allocate.
                              # 0: none (the cache grows as needed). A hint:
                              # never a limit, never changes a bit.
}

struct Sampling {
  # A session's token choice (docs/sampling.md), fixed for its lifetime.
  # Floats travel as their IEEE-754 binary32 bits.
  temperatureBits @0 :UInt32;   # 0 (+0.0): greedy argmax
  topK @1 :UInt32;              # 0: no limit
  topPBits @2 :UInt32;          # 0x3f800000 (1.0): no limit
  seed @3 :UInt64;
}

struct ChainHandoff {
  # The witness chain on its way to the last stage, which chooses the
  # step's token from its logits, folds logits || token into the chain and
  # answers with a StepResult instead of Logits (docs/wire_protocol.md,
  # "Chain handoff"). Absent: the last stage sends Logits.
  decodeStep @0 :UInt32;      # The step's index for sampling (0 = first token).
  chainState @1 :Data;        # Exactly 108 bytes: the SHA-256 state (layout
                              # in the doc); refused unless consistent.
  relay @2 :UInt32;           # Steps that follow this one without the
                              # coordinator: the last stage also sends the
                              # chosen token to the first stage as the
                              # session's next step (TokenInput.relayed,
                              # with relay - 1 to follow), before its
                              # StepResult. 0: none.
}

struct TokenInput {
  # coordinator -> first stage, as `prefill` (many tokens) or `decode`
  # (normally one token).
  sessionId @0 :UInt64;
  step @1 :UInt32;            # Monotonic per session; echoed in Logits.
  firstPosition @2 :UInt32;   # Position of tokenIds[0] in the sequence.
  tokenIds @3 :List(UInt32);
  handoff @4 :ChainHandoff;   # Null: the last stage replies with Logits.
  noOutput @5 :Bool;          # The step's outputs are not needed (a prompt
                              # chunk that is not the last): the last stage
                              # computes no logits and replies nothing.
                              # Refused together with a handoff.
  relayed @6 :Bool;           # Sent by the last stage as the next step of a
                              # relay (ChainHandoff.relay); accepted from it
                              # alone, and only as the step its session
                              # expects next.
  stepRows @7 :UInt16;        # 0: an ordinary step (its last row is the
                              # step). R > 0, with a handoff: a multi-row
                              # step whose last R rows are decode steps
                              # handoff.decodeStep .. decodeStep+R-1; the
                              # last stage answers one StepResult with R
                              # outcomes (docs/wire_protocol.md, "Multi-row
                              # steps"). Refused unless R <= tokenIds, with a
                              # handoff of relay 0, and not relayed.
}

struct HiddenFrame {
  # stage k -> stage k+1: the residual stream after the sender's last layer.
  sessionId @0 :UInt64;
  step @1 :UInt32;
  firstPosition @2 :UInt32;
  seq @3 :UInt32;             # Positions in the frame (> 0).
  hidden @4 :UInt32;          # Model width (> 0).
  resumeLayer @5 :UInt32;     # First layer the receiver must run.
  payload @6 :Data;           # [seq][hidden] little-endian binary32;
                              # exactly seq * hidden * 4 bytes.
  digest @7 :Data;            # 32 bytes; see "Frame digests" in the doc.
  handoff @8 :ChainHandoff;   # Carried on from the TokenInput; covered by
                              # the digest when present.
  noOutput @9 :Bool;          # Carried on from the TokenInput; covered by
                              # the digest when set.
  layerDigests @10 :Data;     # Traced sessions: 32 bytes per layer
                              # [0, resumeLayer), this step's, concatenated
                              # (a multi-row step: per step row, that row's
                              # layers, rows in order); empty otherwise.
                              # Covered by the digest.
  stepRows @11 :UInt16;       # Carried on from the TokenInput; covered by
                              # the digest when not 0.
}

struct Logits {
  # last stage -> coordinator: the logits of the last position of a step.
  sessionId @0 :UInt64;
  step @1 :UInt32;
  vocab @2 :UInt32;           # Number of logits (> 0).
  payload @3 :Data;           # [vocab] little-endian binary32.
  digest @4 :Data;            # 32 bytes; see "Frame digests" in the doc.
  layerDigests @5 :Data;      # Traced sessions: 32 bytes per model layer,
                              # this step's; empty otherwise. Covered by the digest.
}

struct Evict {
  # coordinator -> every worker: drop `count` cached positions of a session
  # starting at position `from`.
  sessionId @0 :UInt64;
  from @1 :UInt32;
  count @2 :UInt32;
}

struct Fork {
  # coordinator -> every worker: create `newSessionId` as a copy of the
  # cached prefix of `sourceSessionId`, with its sampling parameters.
  newSessionId @0 :UInt64;
  sourceSessionId @1 :UInt64;
  reservePositions @2 :UInt32;  # Cache entries the copy is expected to
                                # reach, as SessionOpen's: a hint, reserved
                                # within each stage's limits; 0: none.
}

struct Release {
  # coordinator -> every worker: free all state of a session.
  sessionId @0 :UInt64;
}

struct Heartbeat {
  # Either direction; any message also counts as a sign of life.
  sequence @0 :UInt64;
  sender @1 :Text;
  # A worker's reply also reports its counters since it started (for the
  # server's metrics; not part of any digest): nanoseconds its stage spent
  # on steps (layers, logits, encoding their frames), and bytes it sent to
  # the next stage. Zero in the coordinator's heartbeats.
  computeNanos @2 :UInt64;
  bytesToNext @3 :UInt64;
}

enum ErrorKind {
  # Same names and order as lockstep::ErrorKind in base/status.h.
  ok @0;
  invalid @1;
  corrupt @2;
  mismatch @3;
  notFound @4;
  io @5;
  disconnected @6;
  timeout @7;
  overloaded @8;
  unimplemented @9;
  internal @10;
}

struct Error {
  # Either direction: a request failed. Daemons report, they do not exit.
  kind @0 :ErrorKind;
  message @1 :Text;
  sessionId @2 :UInt64;       # Meaningful only when hasSession.
  hasSession @3 :Bool;
}

struct Shutdown {
  # coordinator -> worker: finish in-flight work and exit cleanly.
  reason @0 :Text;
}

struct StepResult {
  # last stage -> coordinator, for a step that carried a ChainHandoff: the
  # step's outcome instead of its logits (about 250 bytes, not vocab * 4).
  sessionId @0 :UInt64;
  step @1 :UInt32;            # Echoes TokenInput.step.
  token @2 :UInt32;           # The chosen id; the coordinator checks < vocab.
  logitsSha256 @3 :Data;      # 32 bytes: SHA-256 of the step's logits bytes.
  chainState @4 :Data;        # 108 bytes: the chain after logits || token.
  digest @5 :Data;            # 32 bytes; see "Frame digests" in the doc.
  layerDigests @6 :Data;      # Traced sessions: 32 bytes per model layer,
                              # this step's (a multi-row step: per step row,
                              # rows in order); empty otherwise. Covered by
                              # the digest.
  laterRows @7 :Data;         # A multi-row step of R rows: the outcomes of
                              # rows 1 .. R-1 (the fields above are row 0's),
                              # 144 bytes each: u32 LE token, the logits
                              # sha256 (32 bytes), the chain state after
                              # that row (108 bytes). Empty otherwise.
                              # Covered by the digest.
}
