// How a stage cuts its work between threads (CIS-2 §5: only independent
// outputs are split, never one sum). A matrix product over a PackedMatrix
// is cut into work items of kUnitPanels panels (a panel: ops::kPanelRows
// output rows), each computing every row of the step for its panels; row-
// wise steps (norms, routing, residuals) are cut by rows. Stateless
// helpers; thread-safe as their callbacks are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "base/populate.h"
#include "engine/ops/packed_matrix.h"
#include "engine/ops/thread_pool.h"

namespace lockstep {

// Panels in one work item of a matmul: 2, as the kernels take panels in
// pairs (decode streams two at once; several rows share each broadcast
// between two panels' rows).
inline constexpr size_t kUnitPanels = 2;

inline size_t Units(const ops::PackedMatrix& w) {
  return (w.panels() + kUnitPanels - 1) / kUnitPanels;
}

// Panels [UnitBegin(u), UnitEnd(w, u)) of work item u of w.
inline size_t UnitBegin(size_t u) { return u * kUnitPanels; }
inline size_t UnitEnd(const ops::PackedMatrix& w, size_t u) {
  return std::min((u + 1) * kUnitPanels, w.panels());
}

// Grows a scratch buffer to at least n elements (allocates only when it
// must, its fresh pages populated at once: base/populate.h; never shrinks,
// so a reserved step allocates nothing).
template <class T>
void FitScratch(std::vector<T>& v, size_t n) {
  if (v.size() < n) ResizePopulated(v, n);
}

// fn(u) for every work item u in [0, units) of a matmul, in one run of
// consecutive items per thread (ops::ForEachInRuns, see Stage::MatMul),
// whatever the rows: a decode step's too, so the prefetch that reaches
// past a panel fetches the thread's own next one (with items claimed one
// by one the threads alternated and each panel started cold: Q8_0 decode
// 1.19-1.45x faster in runs, BF16 0.89-1.24x, docs/performance.md).
template <class F>
void ForEachUnit(ops::ThreadPool* pool, size_t units, F&& fn) {
  ops::ForEachInRuns(pool, units, fn);
}

// fn(t) for every row t < n. Rows are independent (each writes only its
// own outputs), so several are split across the pool, in runs
// (ops::ForEachInRuns): a row's norm is ~1 us, and claiming rows one by one
// from a counter both threads contend for cost about as much; one runs
// inline.
template <class F>
void ForEachRow(ops::ThreadPool* pool, size_t n, F&& fn) {
  ops::ForEachInRuns(pool, n, fn);
}

}  // namespace lockstep
