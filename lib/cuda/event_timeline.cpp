// event_timeline.cpp: EventTimeline (event_timeline.h).
#include "cuda/event_timeline.h"

#include "core/error.h"
#include "core/timer.h"
#include "cuda/check.h"

namespace prophet::cuda {

EventTimeline::~EventTimeline() {
    for (cudaEvent_t ev : pool_) cudaEventDestroy(ev);  // best effort: no throwing from a destructor
    if (reference_ != nullptr) cudaEventDestroy(reference_);
}

cudaEvent_t EventTimeline::next_event() {
    if (used_ == pool_.size()) {
        cudaEvent_t ev = nullptr;
        PROPHET_CUDA_CHECK(cudaEventCreate(&ev));
        pool_.push_back(ev);
    }
    cudaEvent_t ev = pool_[used_++];
    PROPHET_CUDA_CHECK(cudaEventRecord(ev, ctx_.stream()));
    return ev;
}

void EventTimeline::begin_step() {
    if (!on()) return;
    if (reference_ == nullptr) PROPHET_CUDA_CHECK(cudaEventCreate(&reference_));
    used_ = 0;
    spans_.clear();
    open_ = false;
    PROPHET_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));  // idle: the reference runs as it is recorded
    PROPHET_CUDA_CHECK(cudaEventRecord(reference_, ctx_.stream()));
    reference_ns_ = now_ns();
}

void EventTimeline::begin(OpKind kind, int block) {
    if (!on() || reference_ == nullptr) return;
    PROPHET_ASSERT_MSG(!open_, "EventTimeline: begin inside an open span");
    next_event();
    spans_.push_back({kind, block, used_ - 1, 0});
    open_ = true;
}

void EventTimeline::end() {
    if (!on() || !open_) return;
    next_event();
    spans_.back().end = used_ - 1;
    open_ = false;
}

void EventTimeline::flush() {
    if (!on() || reference_ == nullptr) return;
    PROPHET_ASSERT_MSG(!open_, "EventTimeline: flush inside an open span");
    auto host_ns = [&](size_t i) {
        float ms = 0.0f;
        PROPHET_CUDA_CHECK(cudaEventElapsedTime(&ms, reference_, pool_[i]));
        return reference_ns_ + (int64_t)((double)ms * 1e6);
    };
    for (const Span& s : spans_) sink_->add(s.kind, OpLane::kCompute, s.block, 0, host_ns(s.start), host_ns(s.end));
    spans_.clear();
    used_ = 0;
}

}  // namespace prophet::cuda
