// UpdateLanes: several independent SHA-256 streams fed in one call, each
// ending in exactly the state it would reach fed alone (Sha256Stream), so
// every digest is plain SHA-256 of its own bytes.
//
// Why: one SHA-256 stream is a chain of dependent rounds, so a core hashing
// one file leaves most of its vector units idle. Where this CPU has
// AVX-512VL, the whole 64-byte blocks that two to eight streams hold at
// once are compressed together, one stream per 32-bit lane of a 256-bit
// vector (Sha256BlocksX8). Without the SHA extensions that pays from two
// streams: the earlier four-lane kernel on 128-bit vectors cost about one
// stream through OpenSSL, and this one issues the same instructions on
// 256-bit vectors. With them, OpenSSL's one stream runs at ~1.15 GB/s and
// the kernel's eight at ~1.67 GB/s together (`ops_bench
// --benchmark_filter=Sha256Streams` on a Xeon with AMX; not measured on
// other CPUs with the extensions), so there it pays only from
// kSha256LanesOverShaExtensions streams. Everything else (a
// single stream, the bytes completing a pending partial block, the tail of
// each call, fewer streams than pay) goes through Sha256Stream.
//
// Thread-safe for distinct streams; a stream must not be shared by calls
// running at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/sha256.h"

namespace lockstep {

inline constexpr size_t kSha256Lanes = 8;
// Streams from which the kernel beats OpenSSL on a CPU with the SHA
// extensions (six: ~1.29 GB/s together against ~1.15).
inline constexpr size_t kSha256LanesOverShaExtensions = 6;

// Feeds bytes[i] to *streams[i]. REQUIRES streams.size() == bytes.size()
// <= kSha256Lanes, distinct streams.
void UpdateLanes(std::span<Sha256Stream* const> streams,
                 std::span<const std::span<const uint8_t>> bytes);

// UpdateLanes' vector path whatever the CPU's SHA extensions: whole blocks
// of two or more streams through Sha256BlocksX8. UpdateLanes calls it
// where it pays; tests call it wherever it runs. REQUIRES
// Sha256LanesKernelRuns(), streams and bytes as for UpdateLanes.
void UpdateLanesInKernel(std::span<Sha256Stream* const> streams,
                         std::span<const std::span<const uint8_t>> bytes);

// Whether UpdateLanes compresses `streams` streams together on this CPU:
// the kernel runs, and streams >= 2 without the SHA extensions or
// streams >= kSha256LanesOverShaExtensions with them.
bool Sha256LanesPay(size_t streams);
// Whether this CPU can run Sha256BlocksX8 (AVX-512VL).
bool Sha256LanesKernelRuns();

// The compression kernel, for its bit-equality test: h[l] is lane l's
// chaining value (FIPS 180-4 H0..H7), advanced over n whole blocks at
// blocks[l] (64 * n bytes each). REQUIRES Sha256LanesKernelRuns().
void Sha256BlocksX8(uint32_t h[kSha256Lanes][8], const uint8_t* const blocks[kSha256Lanes],
                    size_t n);

}  // namespace lockstep
