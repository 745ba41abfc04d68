// event_timeline.h: GPU op times from cudaEvent pairs, onto the trainer's host timeline (schedule/timeline.h), so
// a GPU run's timeline shows what the device did and when, not when the host enqueued it.
//
//   EventTimeline events(ctx);
//   events.set_sink(&timeline);           // nullptr: off (begin/end do nothing)
//   events.begin_step();                  // waits for the stream, then a reference event at a known host time
//   events.begin(OpKind::kAttn, l); ...kernels...; events.end();   // an event before and after, on ctx's stream
//   ctx.synchronize(); events.flush();    // every pair -> OpRecord on the compute lane, host ns
//
// Host time of an event = the reference's host time + cudaEventElapsedTime(reference, event). begin_step first
// waits for the stream (only when a sink is set), so the reference event completes at once and the two clocks
// line up to within the launch latency (microseconds).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/context.h"
#include "schedule/timeline.h"

namespace prophet::cuda {

class EventTimeline {
  public:
    explicit EventTimeline(Context& ctx) : ctx_(ctx) {}
    ~EventTimeline();
    EventTimeline(const EventTimeline&) = delete;
    EventTimeline& operator=(const EventTimeline&) = delete;

    void set_sink(OpTimeline* sink) { sink_ = sink; }
    bool on() const { return sink_ != nullptr; }
    void begin_step();
    void begin(OpKind kind, int block);
    void end();
    // After the stream has been synchronized: the pairs since begin_step into the sink (then forgotten).
    void flush();

  private:
    cudaEvent_t next_event();  // from the pool, recorded on ctx's stream

    struct Span {
        OpKind kind;
        int block;
        size_t start, end;  // event indices
    };
    Context& ctx_;
    OpTimeline* sink_ = nullptr;
    std::vector<cudaEvent_t> pool_;  // grows to the most events one step needs, then reused
    size_t used_ = 0;
    bool open_ = false;
    std::vector<Span> spans_;
    cudaEvent_t reference_ = nullptr;
    int64_t reference_ns_ = 0;
};

}  // namespace prophet::cuda
